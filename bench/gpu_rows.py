"""The measurements of the GPU check (bench/gpu.py): the paper profile's models at its shapes,
trained the way the training loop trains them (StepForward, its optimizer), on one device."""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import transformers

from bench.train_throughput import step_flops
from emergence.core.config import read_params
from emergence.core.models.hf import to_hf
from emergence.core.models.mamba2 import KERNEL_ENTRY_POINTS, kernel_paths
from emergence.core.models.registry import build_model
from emergence.core.profile import merge_into, profile_path
from emergence.core.resources import AttnOnlyWorkload, Workload, workload
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import StepForward, _fast_matmuls, _make_optimizer

# Dense bf16 tensor-core peaks from the vendors' data sheets (sparsity not counted), FLOP/s; the first key a
# device's name holds is its peak (an "H200 NVL" is no H200 SXM: 1,671 sparse TFLOPS, not 1,979).
PEAK_BF16 = {
    "H100 80GB HBM3": 989.4e12, "H100 PCIe": 756.5e12, "H100 NVL": 835.5e12, "H200 NVL": 835.5e12, "H200": 989.4e12,
}  # fmt: skip
BINDING_STEPS = 105_469  # one paper-scale binding seed (profiles/paper.yaml binding_train.steps)
GROUNDING_VOCAB = 8192  # a stand-in: the real vocabulary is built from the user's corpus


@dataclass(frozen=True)
class Spec:
    name: str
    arch: str
    config: dict
    batch: int
    seq: int
    estimate: Workload | AttnOnlyWorkload | None  # resources.py's sizes of the same job

    def build(self, device: str) -> torch.nn.Module:
        torch.manual_seed(0)
        return build_model(self.arch, dict(self.config), self.name).to(device)


def paper_params() -> dict:
    params = read_params(Path("params.yaml"))
    merge_into(params, read_params(profile_path("paper")))
    return params


def specs(params: dict, smoke: bool) -> list[Spec]:
    """The paper profile's architectures at its shapes (smoke: the same kinds, tiny)."""
    b = dict(params["binding_model"])
    b.pop("arch", None)
    g = params["grounding_models"]
    train_g, train_b = params["grounding_train"], params["binding_train"]
    corpus = params["assoc_corpus"]
    if smoke:
        b.update(n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=64, n_ctx=32)
        tf, mamba, lstm = (
            {"n_layers": 2, "d_model": 32, "n_heads": 2, "d_head": 16, "d_mlp": 64},
            {"n_layers": 2, "d_model": 32, "d_state": 16, "head_dim": 16, "chunk_size": 16},
            {"n_layers": 2, "d_model": 32},
        )
        seq_g, batch_b, batch_g, vocab_g, vocab_a, seq_a, batch_a = 16, 4, 2, 64, 64, 16, 2
    else:
        # a grounding_models entry also names its arch, which the model's config does not take
        names = ("transformer12", "mamba12", "lstm4")
        tf, mamba, lstm = ({k: v for k, v in g[m].items() if k != "arch"} for m in names)
        seq_g, batch_b, batch_g = train_g["seq_len"], train_b["batch_size"], train_g["batch_size"]
        vocab_g, vocab_a, seq_a, batch_a = GROUNDING_VOCAB, corpus["vocab_size"], corpus["seq_len"], 256
    binding = {**b, "d_vocab": 41}
    grounding = {"n_ctx": seq_g, "d_vocab": vocab_g}

    def spec(name: str, arch: str, config: dict, batch: int, seq: int) -> Spec:
        return Spec(name, arch, config, batch, seq, _sized(config, batch))

    out = [
        spec("binding GPT-2", "transformer", binding, batch_b, b["n_ctx"]),
        spec("grounding Transformer", "transformer", {**tf, **grounding}, batch_g, seq_g),
        spec("grounding Mamba-2", "mamba2", {**mamba, **grounding}, batch_g, seq_g),
        spec("grounding LSTM", "lstm", {**lstm, **grounding}, batch_g, seq_g),
    ]
    attn = {"n_layers": params["assoc_order"]["n_layers"], "d_vocab": vocab_a, "n_ctx": seq_a}
    estimate = AttnOnlyWorkload(attn["n_layers"], vocab_a, seq_a, batch_a, 1, 4)
    return [*out, Spec("association attention-only", "attn_only", attn, batch_a, seq_a, estimate)]


def _sized(config: dict, batch: int) -> Workload | None:
    return workload({**config, "batch_size": batch, "steps": 1})


def sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def trainer(
    model: torch.nn.Module, precision: str, compiled: bool, device: str, hf: bool = False, mode: str = "default"
) -> Callable[[torch.Tensor], torch.Tensor]:
    """One AdamW training step of `model` as the training loop makes it (StepForward, its optimizer).
    An HF model gets the same step; it shifts its labels itself."""
    cfg = TrainConfig(
        steps=1, batch_size=1, lr=1e-4, device=device, precision=precision, compile=compiled, compile_mode=mode
    )
    forward, optimizer = StepForward(model, cfg, device, "gpu-check"), _make_optimizer(model, cfg, device)

    def step(idx: torch.Tensor) -> torch.Tensor:
        with _fast_matmuls(device):  # TF32 in fp32 on a GPU, as the loop trains
            optimizer.zero_grad(set_to_none=True)
            labels = F.pad(idx[:, 1:], (0, 1), value=-1)
            loss = forward(input_ids=idx, labels=idx).loss if hf else forward(idx, labels)[1]
            loss.backward()
            optimizer.step()
        step.forward_path = forward.path  # after the forward: "eager (compile failed)" once a compile failed
        return loss

    return step


def timed_rates(steps: dict[str, Callable], idx: torch.Tensor, a: argparse.Namespace, device: str) -> dict:
    """{name: tokens/s}: rounds alternate between the steps so load hits all alike."""
    for step in steps.values():
        for _ in range(3):  # warm-up, and compilation on the first call
            step(idx)
    sync(device)
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(a.rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(a.steps):
                step(idx)
            sync(device)
            times[name].append((time.perf_counter() - start) / a.steps)
    return {name: idx.numel() / statistics.median(t) for name, t in times.items()}


def peak_flops(device: str) -> tuple[float | None, str]:
    """(dense bf16 FLOP/s, where the number comes from)."""
    if torch.device(device).type != "cuda":
        return None, "no GPU"
    name = torch.cuda.get_device_name(device)
    for key, peak in PEAK_BF16.items():
        if key in name:
            return peak, f"data sheet ({key})"
    n = 8192
    x = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    x @ x
    sync(device)
    start = time.perf_counter()
    for _ in range(10):
        x @ x
    sync(device)
    return 2 * n**3 * 10 / (time.perf_counter() - start), "measured 8192^3 bf16 matmul"


def arch_row(spec: Spec, precision: str, compiled: bool, a: argparse.Namespace, device: str, peak: float | None):
    model = spec.build(device).train()
    idx = torch.randint(spec.config["d_vocab"], (spec.batch, spec.seq), device=device)
    flops = step_flops(lambda i: model(i, F.pad(i[:, 1:], (0, 1), value=-1))[1], idx)
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    step = trainer(model, precision, compiled, device)
    rate = timed_rates({"x": step}, idx, a, device)["x"]
    tflops = flops * rate / idx.numel() / 1e12
    cuda = torch.device(device).type == "cuda"
    estimate = spec.estimate
    return {
        "model": spec.name,
        "precision": precision,
        "compiled": compiled,
        "batch": spec.batch,
        "seq": spec.seq,
        "tokens_per_s": rate,
        "tflops": tflops,
        "mfu": tflops * 1e12 / peak if peak else None,
        "peak_mem_mib": torch.cuda.max_memory_allocated(device) / 2**20 if cuda else None,
        "estimate_mib": (estimate.state_bytes + estimate.activation_bytes) / 2**20 if estimate else None,
        "kernels": model.kernels() if hasattr(model, "kernels") else None,
        "forward": step.forward_path,
    }


def costliest(events: list, cuda: bool) -> tuple[list, str]:
    """(the profiler's averaged events that ran on the device, costliest first; the time attribute):
    kernels on a GPU, where a record_function range (Optimizer.step#AdamW.step) also shows as a device
    event spanning kernels already counted; CPU ops on a CPU."""
    from torch.autograd import DeviceType

    kind, attr = (DeviceType.CUDA, "self_device_time_total") if cuda else (DeviceType.CPU, "self_cpu_time_total")
    ops = [e for e in events if e.device_type == kind and getattr(e, attr) > 0]
    ops = [e for e in ops if not (cuda and e.is_user_annotation)]
    return sorted(ops, key=lambda e: -getattr(e, attr)), attr


def step_profile(spec: Spec, precision: str, compiled: bool, a: argparse.Namespace, device: str, top: int = 8) -> dict:
    """Where one training step's time goes: wall ms against the ms the device spends in kernels (their
    summed durations under torch.profiler; far less than the wall means the step waits on the host:
    launches, Python) and the kernels that take most. On a CPU the ops' own CPU time stands in."""
    from torch.profiler import ProfilerActivity, profile

    model = spec.build(device).train()
    step = trainer(model, precision, compiled, device)
    idx = torch.randint(spec.config["d_vocab"], (spec.batch, spec.seq), device=device)
    cuda = torch.device(device).type == "cuda"
    wall = 1e3 * idx.numel() / timed_rates({"x": step}, idx, a, device)["x"]  # unprofiled: the profiler slows the host
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(a.steps):
            step(idx)
        sync(device)
    ops, attr = costliest(prof.key_averages(), cuda)
    busy = sum(getattr(e, attr) for e in ops) / 1e3 / a.steps  # us in all -> ms a step
    return {
        "model": spec.name,
        "precision": precision,
        "compiled": compiled,
        "wall_ms": wall,
        "device_busy_ms": busy if cuda else None,
        "kernels_per_step": sum(e.count for e in ops) / a.steps if cuda else None,
        "top": [{"name": e.key[:120], "ms": getattr(e, attr) / 1e3 / a.steps} for e in ops[:top]],
    }


@contextmanager
def torch_path() -> Iterator[None]:
    """HF's Mamba-2 mixer on its torch functions, whatever imported: each wrapper's __wrapped__."""
    from transformers.models.mamba2 import modeling_mamba2

    saved = {name: getattr(modeling_mamba2, name) for name in KERNEL_ENTRY_POINTS.values()}
    paths = dict(zip(KERNEL_ENTRY_POINTS.values(), kernel_paths().values()))
    if missing := [n for n, fn in saved.items() if not hasattr(fn, "__wrapped__") and paths[n] != "torch"]:
        raise RuntimeError(f"transformers {transformers.__version__}: {', '.join(missing)} wrap no torch function")
    try:
        for name, fn in saved.items():
            setattr(modeling_mamba2, name, getattr(fn, "__wrapped__", fn))  # none: already HF's torch function
        yield
    finally:
        for name, fn in saved.items():
            setattr(modeling_mamba2, name, fn)


def torch_path_row(spec: Spec, a: argparse.Namespace, device: str, peak: float | None) -> dict:
    with torch_path():
        row = arch_row(spec, "bf16", False, a, device, peak)
    return {**row, "model": f"{spec.name} (torch path)"}


def mamba_check(spec: Spec, device: str) -> dict:
    """Our Mamba-2 at `spec`'s shape: logits (eval: chunk scan + conv) and loss (training: the fused
    split-conv-scan) through the kernels that imported, against HF's torch path, in fp32."""
    model = spec.build(device)
    idx = torch.randint(spec.config["d_vocab"], (2, spec.seq), device=device)
    targets = F.pad(idx[:, 1:], (0, 1), value=-1)

    def run() -> tuple[torch.Tensor, float]:
        with torch.no_grad():
            logits = model.eval()(idx)[0].float()
            loss = model.train()(idx, targets)[1].item()
        return logits, loss

    kernels = model.kernels()
    fused_logits, fused_loss = run()
    with torch_path():
        torch_logits, torch_loss = run()
    return {
        "model": spec.name,
        "kernels": kernels,
        "max_abs_logit_diff": (fused_logits - torch_logits).abs().max().item(),
        "loss_diff": abs(fused_loss - torch_loss),
    }


def hf_gpt2_rows(spec: Spec, a: argparse.Namespace, device: str, modes: tuple[bool, ...]) -> list[dict]:
    """Ours (the spec's shape, activation and tying, with learned positions and no dropout) against HF
    GPT2LMHeadModel computing the same function with the same weights (models/hf.py: exact GELU is
    "gelu", GPT-2's tanh one "gelu_new"), bf16 autocast both, eager then compiled; rounds alternate."""
    c = {**spec.config, "pos": "learned", "dropout": 0.0, "conv_kernel": 0}
    ours = Spec(spec.name, "transformer", c, spec.batch, spec.seq, None)
    idx = torch.randint(c["d_vocab"], (spec.batch, spec.seq), device=device)
    rows = []
    for compiled in modes:
        model = ours.build(device)
        hf = to_hf(model).to(device).train()
        steps = {
            "ours": trainer(model.train(), "bf16", compiled, device),
            "hf": trainer(hf, "bf16", compiled, device, hf=True),
        }
        rates = timed_rates(steps, idx, a, device)
        rows.append({"compiled": compiled, "ours_tokens_per_s": rates["ours"], "hf_tokens_per_s": rates["hf"],
                     "ratio": rates["ours"] / rates["hf"], "act": c.get("act", "gelu"),
                     "tied": c.get("tie_embeddings", False)})  # fmt: skip
    return rows


def binding_run(params: dict, a: argparse.Namespace, device: str, smoke: bool, mode: str = "default") -> dict:
    """The paper profile's binding model, data and optimizer, trained for --binding-s seconds with the
    training loop's own step (precision and compile from the paper profile, torch.compile's `mode`);
    loss, held-out accuracy and the minutes one whole seed (105,469 steps) would take at the measured
    step rate."""
    from torch._dynamo.utils import counters  # Inductor counts each graph it could not record as a CUDA graph

    from emergence.core.train.loop import _train_step
    from emergence.studies.binding.batches import encode_programs, predict_answers, sampler
    from emergence.studies.binding.sets import generate_table, load_program_config
    from emergence.studies.binding.tokenizer import CharTokenizer
    from emergence.studies.binding.train_config import model_params, train_params

    tok, program_cfg = CharTokenizer(), load_program_config(params)
    fmt, _, _, cfg = train_params(params, 0, device)
    base = params["base"]
    cfg = dataclasses.replace(cfg, precision=base["precision"], compile=base["compile"], compile_mode=mode)
    n_train, n_eval = (64, 32) if smoke else (16_384, 1024)
    train_rows = generate_table(np.random.default_rng(0), program_cfg, n_train, set_name="gpu-check")
    held_out = generate_table(np.random.default_rng(1), program_cfg, n_eval, set_name="gpu-check-eval")
    data = encode_programs(train_rows["program"], train_rows["answer"], tok, fmt)
    arch, model_cfg = model_params(params, data.idx.shape[1], len(tok))
    if smoke:
        model_cfg.update(n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=64)
        cfg = dataclasses.replace(cfg, batch_size=4, compile=False)
    torch.manual_seed(0)
    model = build_model(arch, model_cfg, "binding_model").to(device).train()
    forward, optimizer = StepForward(model, cfg, device, "gpu-check"), _make_optimizer(model, cfg, device)
    batch_fn = sampler(data, cfg.batch_size, 0)
    skips = counters["inductor"]["cudagraph_skips"]
    losses, times, step, start = [], [], 0, time.perf_counter()
    with _fast_matmuls(device):
        while time.perf_counter() - start < a.binding_s and step < cfg.steps:
            t0 = time.perf_counter()
            stats, _ = _train_step(model, forward, optimizer, batch_fn, cfg, step, device)  # .item() syncs
            times.append(time.perf_counter() - t0)
            losses.append(stats["loss"])
            step += 1
    steady = statistics.median(times[10:] or times)  # compilation and warm-up left out
    model.eval()
    eval_data = encode_programs(held_out["program"], held_out["answer"], tok, fmt)
    accuracy = float((predict_answers(model, eval_data, tok) == held_out["answer"].to_numpy()).mean())
    return {
        "steps": step,
        "batch": cfg.batch_size,
        "precision": cfg.precision,
        "compiled": forward.compiled is not None,  # a failed compile falls back to eager: what ran
        "compile_mode": cfg.compile_mode if forward.compiled is not None else None,
        "forward": forward.path,
        "first_loss": losses[0],
        "last_loss": statistics.mean(losses[-10:]),
        "held_out_accuracy": accuracy,
        "step_s": steady,
        "predicted_seed_min": steady * BINDING_STEPS / 60,
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"] - skips,  # reduce-overhead: 0 if all recorded
        "note": "steps only: checkpoints and evaluation of a real run come on top",
    }


def seeds_on_one_device(a: argparse.Namespace, device: str, counts: tuple[int, ...]) -> list[dict]:
    """K binding trainings as K processes sharing the device (the paper profile's shape, precision
    and compile), timed over the same window: seeds per hour and the time K seeds take against one."""
    # Workers hit the compile cache of binding_run's model (the same graph), so 30 s warms them up.
    warm, window = (5.0, 3.0) if a.smoke else (30.0, 10.0)
    rows, one = [], None
    for k in sorted({1, *counts}):  # one seed alone first: the reference of vs_one_seed, whatever K were asked
        begin = time.time() + warm  # every worker warms up (and compiles) first, then all are timed together
        cmd = [sys.executable, "-m", "bench.gpu", "--worker", f"{begin}:{window}", "--device", device]
        procs = [subprocess.Popen([*cmd, *(["--smoke"] if a.smoke else [])], stdout=subprocess.PIPE, text=True)
                 for _ in range(k)]  # fmt: skip
        outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        rates = [o["steps_per_s"] for o in outs]
        seed_min = BINDING_STEPS / min(rates) / 60  # the slowest seed ends the batch of K
        one = one or seed_min
        rows.append({"k": k, "steps_per_s": rates, "late_workers": sum(o["late"] for o in outs),
                     "seeds_per_hour": 60 / seed_min * k, "minutes_for_k_seeds": seed_min,
                     "vs_one_seed": seed_min / one})  # fmt: skip
    return rows


def worker(spec_arg: str, a: argparse.Namespace) -> None:
    begin, window = map(float, spec_arg.split(":"))
    params = paper_params()
    spec = specs(params, a.smoke)[0]  # the binding model
    model = spec.build(a.device).train()
    step = trainer(model, params["base"]["precision"], params["base"]["compile"] and not a.smoke, a.device)
    idx = torch.randint(spec.config["d_vocab"], (spec.batch, spec.seq), device=a.device)
    for _ in range(3):
        step(idx)
    sync(a.device)
    late = time.time() > begin
    time.sleep(max(0.0, begin - time.time()))
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < window:
        step(idx)
        n += 1
    sync(a.device)
    print(json.dumps({"steps_per_s": n / (time.perf_counter() - start), "late": late}))
