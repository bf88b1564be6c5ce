"""Training throughput: our Transformer (pos=learned) vs HF GPT2LMHeadModel computing the same function
(exact GELU; GPT-2's own tanh GELU is a second, labelled row), our Mamba-2 LM vs HF
Mamba2ForCausalLM, at the same size; and the achieved GFLOP/s of our Transformer's training step
against a 2048^2 sgemm measured in the same run.

    python -m bench.train_throughput [--steps N --batch B --seq T --d-model D --layers L --heads H]

All models train (AdamW, forward + backward + step) on the same random batch in
the same process. Timed rounds alternate between the models so load from other
processes hits all alike; warmup steps are excluded. Rates are medians over rounds.
A step's FLOPs are counted by torch's FlopCounterMode (matmuls, attention), so
GFLOP/s = counted FLOPs x steps/s. On CPU the fused attention kernel has no FLOP formula (it counts
0), so the counting step runs attention through its math backend, whose matmuls are counted.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from transformers import GPT2Config, GPT2LMHeadModel, Mamba2ForCausalLM

from bench.table import row
from emergence.core.models.mamba2 import Mamba2, hf_config
from emergence.core.models.mamba2_config import Mamba2Config
from emergence.core.models.transformer import Transformer
from emergence.core.models.transformer_config import TransformerConfig

VOCAB = 41
SAME_FUNCTION = "exact GELU, untied, learned positions, no dropout"
Built = tuple[torch.nn.Module, Callable[[torch.Tensor], torch.Tensor]]  # model, idx -> loss


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5, help="timed steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    return ap.parse_args(argv)


def next_token_loss(model: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    # Full-length forward like HF; next-token targets, last position ignored (-1).
    return lambda idx: model(idx, F.pad(idx[:, 1:], (0, 1), value=-1))[1]


def build_ours(a: argparse.Namespace) -> Built:
    cfg = TransformerConfig(
        n_layers=a.layers,
        d_model=a.d_model,
        n_heads=a.heads,
        d_head=a.d_model // a.heads,
        d_mlp=4 * a.d_model,
        n_ctx=a.seq,
        d_vocab=VOCAB,
        pos="learned",
        dropout=0.0,
    )
    model = Transformer(cfg)
    return model, next_token_loss(model)


def build_hf_gpt2(a: argparse.Namespace, activation: str = "gelu") -> Built:
    """HF GPT-2 at our size. activation "gelu" (exact, erf) computes our Transformer's function; GPT-2 as
    shipped uses "gelu_new" (the tanh approximation): a different function, timed as a labelled second row."""
    cfg = GPT2Config(
        activation_function=activation,
        vocab_size=VOCAB,
        n_positions=a.seq,
        n_embd=a.d_model,
        n_layer=a.layers,
        n_head=a.heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        tie_word_embeddings=False,  # ours is untied by default
    )
    model = GPT2LMHeadModel(cfg)  # default attention implementation: sdpa
    return model, lambda idx: model(input_ids=idx, labels=idx).loss  # HF shifts labels itself


def mamba2_config(a: argparse.Namespace) -> Mamba2Config:
    return Mamba2Config(n_layers=a.layers, d_model=a.d_model, d_vocab=VOCAB, n_ctx=a.seq)  # the zoo's defaults


def build_ours_mamba2(a: argparse.Namespace) -> Built:
    model = Mamba2(mamba2_config(a))  # HF's blocks, our hooked forward
    return model, next_token_loss(model)


def build_hf_mamba2(a: argparse.Namespace) -> Built:
    model = Mamba2ForCausalLM(hf_config(mamba2_config(a)))
    return model, lambda idx: model(input_ids=idx, labels=idx).loss


def train_steps(loss_fn: Callable, opt: torch.optim.Optimizer, idx: torch.Tensor, n: int):
    for _ in range(n):
        opt.zero_grad(set_to_none=True)
        loss_fn(idx).backward()
        opt.step()


def tokens_per_second(builders: dict[str, Callable[[argparse.Namespace], Built]], a: argparse.Namespace):
    """{name: (tokens/s, FLOPs of one forward + backward)} for models trained in alternating rounds."""
    torch.manual_seed(0)
    idx = torch.randint(0, VOCAB, (a.batch, a.seq))
    runs = {}
    for name, build in builders.items():
        model, loss_fn = build(a)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        flops = step_flops(loss_fn, idx)
        train_steps(loss_fn, opt, idx, a.warmup)
        runs[name] = (loss_fn, opt, flops, [])
    for _ in range(a.rounds):
        for loss_fn, opt, _, times in runs.values():
            start = time.perf_counter()
            train_steps(loss_fn, opt, idx, a.steps)
            times.append((time.perf_counter() - start) / a.steps)
    return {name: (a.batch * a.seq / statistics.median(t), flops) for name, (*_, flops, t) in runs.items()}


def step_flops(loss_fn: Callable, idx: torch.Tensor) -> int:
    """FLOPs of one forward + backward. The fused CPU attention kernel counts 0 under FlopCounterMode
    (torch 2.13), so attention runs through the math backend here: the same function, unfused, its
    matmuls counted (the timed steps keep the fused kernel)."""
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        loss_fn(idx).backward()
    return counter.get_total_flops()


def sgemm_gflops(n: int = 2048, repeats: int = 5) -> float:
    """Best of `repeats` float32 n x n matmuls on this process's threads: the machine's matmul rate."""
    x, y = torch.randn(n, n), torch.randn(n, n)
    x @ y  # warm-up
    best = min(_timed(lambda: x @ y) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(fn: Callable) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def matmul_profile(build: Callable[[argparse.Namespace], Built], a: argparse.Namespace) -> tuple[float, float]:
    """(share of a training step's CPU time in matmul / attention kernels, their GFLOP/s), by torch.profiler."""
    torch.manual_seed(0)
    idx = torch.randint(0, VOCAB, (a.batch, a.seq))
    model, loss_fn = build(a)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    flops = step_flops(loss_fn, idx)
    train_steps(loss_fn, opt, idx, a.warmup)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        train_steps(loss_fn, opt, idx, a.steps)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    kernels = sum(e.self_cpu_time_total for e in events if MATMUL.search(e.key))
    return kernels / total, flops * a.steps / (kernels / 1e6) / 1e9


MATMUL = re.compile(r"^aten::(mm|addmm|bmm|baddbmm|_scaled_dot_product_\w+attention\w*)$")


def rows(a: argparse.Namespace) -> list[dict]:
    size = f"d{a.d_model}, {a.layers} layers, seq {a.seq}, batch {a.batch}"
    sgemm = sgemm_gflops()
    builders = {"ours": build_ours, "hf_gpt2": build_hf_gpt2, "hf_gpt2_tanh": lambda a: build_hf_gpt2(a, "gelu_new")}
    rates = tokens_per_second({**builders, "ours_mamba2": build_ours_mamba2, "hf_mamba2": build_hf_mamba2}, a)
    sgemm = max(sgemm, sgemm_gflops())  # before and after the training rounds: the better sample
    share, kernel_rate = matmul_profile(build_ours, a)
    evidence = (
        f"{share:.0%} of our step's CPU time is in matmul/attention kernels, which run at {kernel_rate:.0f} GFLOP/s "
        f"({kernel_rate / sgemm:.2f}x the 2048^2 sgemm): small ({a.batch * a.seq} x {a.d_model}) matmuls, "
        "plus elementwise ops, layer norms and AdamW outside them (torch.profiler, same run)"
    )
    (ours, flops), (gpt2, _) = rates["ours"], rates["hf_gpt2"]
    achieved = flops * ours / (a.batch * a.seq) / 1e9  # counted FLOPs per step x steps/s (AdamW uncounted)
    training = row(
        f"training tokens/s ({size})",
        ours,
        "tokens/s",
        f"HF GPT2LMHeadModel, same function ({SAME_FUNCTION}), same size, same run",
        gpt2,
        ">= 1.5x",
    )
    shipped = row(
        f"training tokens/s vs GPT-2 as shipped ({size})",
        ours,
        "tokens/s",
        "HF GPT2LMHeadModel with GPT-2's tanh GELU (gelu_new): a different function, same size, same run",
        rates["hf_gpt2_tanh"][0],
    )
    gflops = row(
        f"training GFLOP/s, our Transformer ({size})",
        achieved,
        "GFLOP/s",
        "float32 2048^2 sgemm, same threads, same run",
        sgemm,
        ">= 0.75x",
    )
    for r in (training, gflops):
        r["bound"] = None if r["met"] else evidence
    mamba = row(
        f"Mamba-2 LM training tokens/s ({size})",
        rates["ours_mamba2"][0],
        "tokens/s",
        "HF Mamba2ForCausalLM, same blocks, same run",
        rates["hf_mamba2"][0],
    )
    return [training, shipped, mamba, gflops]


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    for r in rows(a):
        print(f"{r['benchmark']}: {r['value']:,.0f} {r['unit']} vs {r['reference_value']:,.0f}: {r['ratio']:.3f}x")


if __name__ == "__main__":
    main()
