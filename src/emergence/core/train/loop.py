"""The one training loop every study uses: checkpoints, metrics, exact resume.

Exact resume rests on two rules: the data is a pure function of the step
(`batch_fn(step)`), and torch's RNG is re-seeded from (seed, step) before
every update, so dropout is a pure function of the step too. A run resumed
from its scratch state therefore ends with the same bits as one that never
stopped. That holds on the CPU, in fp32 and bf16, eager and compiled; on a
GPU only as far as its kernels are deterministic (docs/gpu.md).

On a GPU the loop uses what makes small models fast: TF32 matmuls, the fused
AdamW, and, as params, bf16 autocast (`precision`) and `torch.compile`.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from tqdm import tqdm

from emergence.core import stage_record
from emergence.core.io import PipelineError, write_parquet
from emergence.core.train.checkpoint import (
    capture_resume_state,
    clear_run_files,
    load_resume_state,
    publish_run,
    run_fingerprint,
    save_checkpoint,
    write_resume_state,
)
from emergence.core.train.config import TrainConfig
from emergence.core.train.schedule import CheckpointPlan, lr_factor

BatchFn = Callable[[int], tuple[torch.Tensor | dict[str, torch.Tensor], torch.Tensor]]  # (inputs, targets)
EvalFn = Callable[[nn.Module, int], dict[str, Any]]
RESUME, METRICS = "resume", "metrics.parquet"  # resume: a folder of safetensors + JSON


def train(
    model: nn.Module,
    batch_fn: BatchFn,
    cfg: TrainConfig,
    out_dir: str | Path,
    scratch_dir: str | Path,
    *,
    eval_fn: EvalFn | None = None,
    data_fingerprint: str = "",
    progress: bool = True,
    where: str = "train",
) -> pd.DataFrame:
    """Train `model` for cfg.steps updates; publish checkpoints + metrics.parquet as `out_dir`.

    Work happens in `scratch_dir` (resumed from if it holds a matching resume
    state); `out_dir` appears, atomically, only when the run is complete.
    Metrics rows: step, tokens (seen before the step), loss, lr, grad_norm
    (of the update made at that step) plus eval_fn's keys where it ran; the
    row of the final step exists only if eval_fn ran there. No wall-clock
    columns, so metrics.parquet is byte-identical across reruns.

    A nan or inf loss stops the run (cfg.on_nonfinite "stop": a PipelineError
    naming the step, `where` naming the params section) keeping the resume
    state of an earlier step; "continue" trains on and records the first such
    step as `diverged_at` in the meta of every later checkpoint. A resume state
    written under "continue" past such a step stops a run under "stop" at once,
    naming that step, the state kept.
    """
    cfg.validate(where)
    out_dir, scratch_dir = Path(out_dir), Path(scratch_dir)
    _seed_everything(cfg.seed)
    # on_nonfinite is a policy, not part of the run: the bits are the same until a loss goes non-finite,
    # so a run stopped there resumes under "continue", and a finite run's checkpoints do not depend on it.
    train_dict = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "on_nonfinite"}
    fingerprint = run_fingerprint(train_dict, model, data_fingerprint)  # before .to(): hashes init weights
    device = resolve_device(cfg.device)
    check_precision(cfg.precision, device)
    model.to(device).train()
    optimizer = _make_optimizer(model, cfg, device)
    forward = StepForward(model, cfg, device, where)
    kernels = _kernels(model, device, where)
    resumed = load_resume_state(scratch_dir / RESUME, fingerprint, model, optimizer, device)
    if resumed is None:
        clear_run_files(scratch_dir, [RESUME, METRICS])  # leftovers of another run must not be published
        resumed = {"step": 0, "tokens": 0, "rows": []}
    start, tokens, rows = resumed["step"], resumed["tokens"], resumed["rows"]
    saved = start if start > 0 else None  # the step of the resume state on disk
    first = _first_nonfinite(rows)  # a state written under "continue" past a nan or inf loss holds its row
    diverged = None if first is None else first["step"]
    if first is not None and cfg.on_nonfinite == "stop":  # a state no run under "stop" reaches: stop as it does
        raise _diverged(where, first, diverged, saved, scratch_dir / RESUME)
    scratch_dir.mkdir(parents=True, exist_ok=True)
    plan = CheckpointPlan(cfg.steps, cfg.dense_until, cfg.n_log_checkpoints, cfg.checkpoint_every)
    meta = {"train": train_dict, "data_fingerprint": data_fingerprint}
    with (
        _fast_matmuls(device),
        tqdm(total=cfg.steps, initial=start, disable=None if progress else True, desc="train") as bar,
    ):
        for step in range(start, cfg.steps + 1):
            pending = None  # written only once this step's loss is known to be finite
            if step != start and (step % cfg.resume_every == 0 or step in plan):
                pending = capture_resume_state(
                    model=model, optimizer=optimizer, step=step, tokens=tokens, rows=rows, fingerprint=fingerprint
                )
            row: dict[str, Any] = {"step": step, "tokens": tokens}
            evaluate = eval_fn is not None and (step in plan or (cfg.eval_every > 0 and step % cfg.eval_every == 0))
            if evaluate:
                row.update(_evaluate(model, eval_fn, step))
            if step in plan:
                save_checkpoint(
                    model, scratch_dir, step, meta if diverged is None else {**meta, "diverged_at": diverged}
                )
            if step < cfg.steps:
                stats, n_tokens = _train_step(model, forward, optimizer, batch_fn, cfg, step, device)
                if not math.isfinite(stats["loss"]):
                    if cfg.on_nonfinite == "stop":
                        raise _diverged(where, stats, step, saved, scratch_dir / RESUME)
                    if diverged is None:
                        diverged = step
                        tqdm.write(
                            f"warning: {where}: loss is {stats['loss']} at step {step}; training goes on "
                            "(on_nonfinite: continue), the run records diverged_at",
                            file=sys.stderr,
                        )
                row.update(stats)
                tokens += n_tokens
                bar.update(1)
                bar.set_postfix(loss=f"{stats['loss']:.4f}")  # the bar itself shows elapsed time
            if pending is not None:
                write_resume_state(scratch_dir / RESUME, pending)
                saved = step
            if step < cfg.steps or evaluate:
                rows.append(row)
    stage_record.note(
        "training",
        {"device": device, "precision": cfg.precision, "forward": forward.path, **kernels},
    )
    metrics = pd.DataFrame(rows)
    write_parquet(metrics, scratch_dir / METRICS)
    publish_run(scratch_dir, out_dir, [METRICS])
    clear_run_files(scratch_dir, [RESUME, METRICS])
    return metrics


def _first_nonfinite(rows: list[dict]) -> dict | None:
    """The row of the first step whose training loss is nan or inf (None: none is)."""
    return next((row for row in rows if "loss" in row and not math.isfinite(row["loss"])), None)


def _diverged(where: str, stats: dict, step: int, saved: int | None, resume: Path) -> PipelineError:
    kept = f"the resume state of step {saved} is kept in {resume}" if saved is not None else "no resume state was saved"
    return PipelineError(
        f"{where}: loss is {stats['loss']} at step {step} (lr {stats['lr']:g}): training diverged; stopped, "
        f"{kept} (lower {where}.lr, or set {where}.on_nonfinite: continue to train on and record the step)"
    )


class StepForward:
    """The training forward `model(...)`: under bf16 autocast when cfg.precision says so, through
    torch.compile when cfg.compile does. A compile that fails (no C++ compiler, an op the backend
    lacks) says so in one line and the run goes on in eager mode, which computes the same function."""

    def __init__(self, model: nn.Module, cfg: TrainConfig, device: str, where: str) -> None:
        self.model, self.where = model, where
        self.autocast = dict(
            device_type=torch.device(device).type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16"
        )
        self.compiled = torch.compile(model, mode=cfg.compile_mode) if cfg.compile else None
        # what ran, for the stage record: the compile mode with it
        self.path = f"compiled ({cfg.compile_mode})" if cfg.compile else "eager"

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(**self.autocast):
            if self.compiled is not None:
                try:
                    return self.compiled(*args, **kwargs)
                except Exception as e:  # noqa: BLE001 - any backend failure; eager re-raises a real error
                    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    tqdm.write(
                        f"warning: {self.where}: torch.compile failed ({type(e).__name__}: {first}); "
                        "training goes on in eager mode",
                        file=sys.stderr,
                    )
                    self.compiled, self.path = None, "eager (compile failed)"
            return self.model(*args, **kwargs)


def _kernels(model: nn.Module, device: str, where: str) -> dict[str, str]:
    """The model's fused-kernel paths (Mamba-2: mamba_ssm or torch); on a GPU, one line for each
    that runs the torch path."""
    kernels = model.kernels() if hasattr(model, "kernels") else {}
    slow = sorted(k for k, path in kernels.items() if path == "torch")
    if slow and torch.device(device).type == "cuda":
        tqdm.write(
            f"warning: {where}: {', '.join(slow)} run the torch path on {device}: the .[gpu] extra "
            "(mamba-ssm, causal-conv1d) is not importable (docs/gpu.md says how to carry it)",
            file=sys.stderr,
        )
    return kernels


def check_precision(precision: str, device: str) -> None:
    """bf16 needs a device that does it: every CPU (autocast), a GPU only from Ampere on."""
    if precision == "bf16" and torch.device(device).type == "cuda" and not torch.cuda.is_bf16_supported():
        raise PipelineError(
            f"base.precision: bf16 is not supported on {device} ({torch.cuda.get_device_name(device)}); "
            "set base.precision: fp32"
        )


@contextmanager
def _fast_matmuls(device: str) -> Iterator[None]:
    """TF32 matmuls on a GPU (fp32 storage, 10-bit mantissa products) while the loop runs; the CPU
    is left alone, so its fp32 results stay bitwise."""
    if torch.device(device).type != "cuda":
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _train_step(
    model: nn.Module,
    forward: StepForward,
    optimizer: torch.optim.Optimizer,
    batch_fn: BatchFn,
    cfg: TrainConfig,
    step: int,
    device: str,
) -> tuple[dict[str, float], int]:
    torch.manual_seed(cfg.seed * 1_000_003 + step)  # dropout as a pure function of step -> exact resume
    inputs, targets = batch_fn(step)
    lr = cfg.lr * lr_factor(step, cfg.steps, cfg.warmup_steps, cfg.schedule, cfg.min_lr_ratio)
    for group in optimizer.param_groups:
        group["lr"] = lr
    if isinstance(inputs, dict):  # e.g. {"idx": tokens, "prefix": image features}
        idx = inputs["idx"]
        _, loss = forward(**{k: v.to(device) for k, v in inputs.items()}, targets=targets.to(device))
    else:
        idx = inputs
        _, loss = forward(idx.to(device), targets.to(device))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    params = [p for p in model.parameters() if p.grad is not None]
    if cfg.grad_clip is None:
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params])
    else:
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)  # returns the pre-clip norm
    optimizer.step()
    return {"loss": loss.item(), "lr": lr, "grad_norm": grad_norm.item()}, idx.numel()


def _evaluate(model: nn.Module, eval_fn: EvalFn, step: int) -> dict[str, Any]:
    model.eval()
    try:
        with torch.no_grad():
            result = eval_fn(model, step)
    finally:
        model.train()
    if clash := sorted(set(result) & {"step", "tokens", "loss", "lr", "grad_norm"}):
        raise ValueError(f"eval_fn returned reserved metric name '{clash[0]}'")
    return result


def _make_optimizer(model: nn.Module, cfg: TrainConfig, device: str) -> torch.optim.Optimizer:
    # As in nanoGPT: decay matrices and embeddings, not biases or norm gains.
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    if cfg.optimizer == "adamw":
        # The fused kernel on a GPU: one launch for every tensor. The CPU keeps the reference loop.
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, fused=torch.device(device).type == "cuda" or None)
    return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
