"""Training throughput: our Transformer (pos=learned) vs HF GPT2LMHeadModel at the same size.

    python bench/train_throughput.py [--steps N --batch B --seq T --d-model D --layers L --heads H]

Both models train (AdamW, forward + backward + step) on the same random batch
in the same process. Timed rounds alternate between the two models so load
from other processes hits both alike; warmup steps are excluded. Prints
tokens/s for each (median over rounds) and the ratio ours / HF.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

from emergence.core.models import Transformer, TransformerConfig

VOCAB = 41


def parse_args() -> argparse.Namespace:
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
    return ap.parse_args()


def build_ours(a: argparse.Namespace) -> tuple[torch.nn.Module, Callable]:
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
    # Full-length forward like HF; next-token targets, last position ignored (-1).
    return model, lambda idx: model(idx, F.pad(idx[:, 1:], (0, 1), value=-1))[1]


def build_hf(a: argparse.Namespace) -> tuple[torch.nn.Module, Callable]:
    cfg = GPT2Config(
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


def steps_per_second(
    model: torch.nn.Module, loss_fn: Callable, opt: torch.optim.Optimizer, idx: torch.Tensor, n: int
) -> float:
    start = time.perf_counter()
    for _ in range(n):
        opt.zero_grad(set_to_none=True)
        loss_fn(idx).backward()
        opt.step()
    return n / (time.perf_counter() - start)


def main() -> None:
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    idx = torch.randint(0, VOCAB, (a.batch, a.seq))
    runs = {}
    for name, build in (("ours", build_ours), ("hf_gpt2", build_hf)):
        model, loss_fn = build(a)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        params = sum(p.numel() for p in model.parameters())
        steps_per_second(model, loss_fn, opt, idx, a.warmup)
        runs[name] = (model, loss_fn, opt, params, [])
    for _ in range(a.rounds):
        for model, loss_fn, opt, _, rates in runs.values():
            rates.append(steps_per_second(model, loss_fn, opt, idx, a.steps))
    tokens = a.batch * a.seq
    tps = {}
    for name, (_, _, _, params, rates) in runs.items():
        tps[name] = tokens * statistics.median(rates)
        print(f"{name:8s} params {params:>10,d}  tokens/s {tps[name]:>10,.0f}")
    print(f"ratio ours/hf_gpt2: {tps['ours'] / tps['hf_gpt2']:.3f}")


if __name__ == "__main__":
    main()
