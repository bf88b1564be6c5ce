"""How long the pipeline will take here, said by `python -m emergence check` (so by `make repro` and
`make snakemake`) before anything runs: per study and in total, from this machine's measured rates.

Each stage instance costs, in seconds:

    start + engine + steps x (STEP_S + FLOPs per step / rate) x (1 + ANALYSIS[study])

- start: a stage process's start (interpreter, torch, pandas and the project imported, params checked),
  measured here by running that in a subprocess (`measure`).
- engine: what the engine spends per stage besides the stage (DVC hashes the deps and rewrites
  dvc.lock after each stage; Snakemake stats files and starts a shell job): ENGINE_S.
- steps: the training steps of a stage that trains (resources.py's workload of its declared params;
  binding programs are shorter than n_ctx: `binding_context`), at the FLOP rate measured here by timing
  real training steps of the zoo's Transformer for about two seconds (`measure`).
- ANALYSIS: per study, its evaluation and analysis time (evaluation during training, patching, lens,
  saliency, reports) as a share of its training time, measured on the default run (docs/bench.md);
  tests/unit/test_estimate.py holds the estimate against the recorded runs in resources/estimate_runs.json.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from emergence.core.declared import instances, interpolate
from emergence.core.resources import STEP_S, Workload, job_workload, on_device

# per stage instance, besides the stage: DVC 3.67 rewrites dvc.lock and hashes deps (a tiny run's wall time
# less its records' wall times, per stage: 3.8 s on 2026-12-05, 4.4 s on 2026-12-06 beside other work);
# Snakemake 9 starts a shell job: 1.0 s assumed, not yet measured
ENGINE_S = {"dvc": 3.9, "snakemake": 1.0}
# evaluation and analyses as a share of the study's training time: what the default run of 2026-12-06
# implies (bench.estimate_record: binding 0.51, grounding 0.45, visual 0.38; associations -0.17, its
# FLOP count of an attention-only step being high, so none)
ANALYSIS = {"binding": 0.5, "associations": 0.0, "grounding": 0.45, "visual": 0.4, "pipeline": 0.0}
STUDIES = {"binding": "binding", "assoc": "associations", "grounding": "grounding", "childes": "grounding",
           "visual": "visual", "visdial": "visual", "dino": "visual"}  # fmt: skip
PROBE = Workload(n_layers=8, d_model=64, d_mlp=256, d_attn=64, n_heads=4, context=64, batch=32, steps=1)
STARTUP = "import torch, pandas, pyarrow.parquet; from emergence.check import load_schemas; load_schemas(Path('.'))"


@dataclass(frozen=True)
class Rates:
    """What this machine does: training FLOP/s at the run's thread count, and a stage's start in seconds."""

    flops: float
    start_s: float


def measure(threads: int, root: Path = Path("."), seconds: float = 2.0) -> Rates:
    """Time real training steps of the zoo's Transformer at a binding-like shape (`PROBE`) for about
    `seconds` on `threads` threads, and one stage start in a subprocess."""
    from emergence.core.models.registry import build_model

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        w = PROBE
        config = dict(n_layers=w.n_layers, d_model=w.d_model, n_heads=w.n_heads, d_head=w.d_attn // w.n_heads,
                      d_mlp=w.d_mlp, n_ctx=w.context, d_vocab=64)  # fmt: skip
        model = build_model("transformer", config)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randint(0, 64, (w.batch, w.context), generator=torch.Generator().manual_seed(0))
        n, began = 0, 0.0
        while n < 3 or time.perf_counter() - began < seconds:
            if n == 2:  # two warm-up steps
                began = time.perf_counter()
            _, loss = model(x, x)
            opt.zero_grad()
            loss.backward()
            opt.step()
            n += 1
        step = (time.perf_counter() - began) / (n - 2)
    finally:
        torch.set_num_threads(before)
    code = f"from pathlib import Path; {STARTUP}"
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True)  # its time, whatever it says
    start = time.perf_counter() - began
    return Rates(flops=w.flops_per_step / max(step - STEP_S, 1e-6), start_s=start)


def study_of(instance: str) -> str:
    """The study a stage instance belongs to, as the index page groups them."""
    return STUDIES.get(instance.split("_")[0], "pipeline")


def binding_context(params: dict, keys: list[str], w: Workload) -> Workload:
    """A binding batch is as long as its programs, not n_ctx: a line is 4 characters (`a=1` and a
    newline), the query (`#a:`) and the answer 4 more."""
    if not any(k == "binding_programs" or k.startswith("binding_programs.") for k in keys):
        return w
    tokens = 4 * params["binding_programs"]["n_lines"] + 4
    return Workload(**{**w.__dict__, "context": min(w.context, tokens)})


def jobs(params: dict, root: Path) -> Iterator[tuple[str, str, Workload | None]]:
    """(instance, study, its training workload; None for a stage that does not train) of every instance."""
    for name, stage in yaml.safe_load((root / "dvc.yaml").read_text())["stages"].items():
        for instance, item in instances(name, stage, params):
            keys = interpolate(stage.get("params", []), {**params, "item": item}, instance)
            w = job_workload(params, keys, instance, item) if on_device(keys) else None
            yield instance, study_of(instance), binding_context(params, keys, w) if isinstance(w, Workload) else w


def estimate(params: dict, root: Path, rates: Rates, engine: str = "dvc") -> dict[str, dict[str, float]]:
    """Per study: its stage instances, its training seconds and its total seconds here."""
    out: dict[str, dict[str, float]] = {}
    for _, study, w in jobs(params, root):
        s = out.setdefault(study, {"stages": 0, "training_s": 0.0, "total_s": 0.0})
        train = 0.0 if w is None else w.steps * (STEP_S + w.flops_per_step / rates.flops)
        s["stages"] += 1
        s["training_s"] += train
        s["total_s"] += rates.start_s + ENGINE_S[engine] + train * (1 + ANALYSIS[study])
    return out


def minutes(seconds: float) -> str:
    return f"{seconds / 60:,.0f} min" if seconds < 5940 else f"{seconds / 3600:,.1f} h"


def lines(params: dict, root: Path, rates: Rates, engine: str = "dvc") -> list[str]:
    """What check prints: the rates it measured, each study's estimate and the total."""
    per = estimate(params, root, rates, engine)
    total = sum(s["total_s"] for s in per.values())
    head = (
        f"estimated time here ({engine}; measured {rates.flops / 1e9:,.0f} GFLOP/s a training step on "
        f"{params['base']['threads']} thread(s), {rates.start_s:.1f} s a stage start):"
    )
    rows = [
        f"  {study:<12} {minutes(s['total_s']):>8}  ({s['stages']} stage runs; training {minutes(s['training_s'])})"
        for study, s in sorted(per.items(), key=lambda kv: -kv[1]["total_s"])
    ]
    tail = "±50 % on the default and tiny runs; paper shapes took 3x it: docs/bench.md"
    return [head, *rows, f"  {'total':<12} {minutes(total):>8}  ({tail})"]
