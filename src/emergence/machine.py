"""What params ask of this machine: each device job's memory against the device, a GPU that is not
there, and the hours of training, said by `python -m emergence check` before anything runs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

from emergence.core.config import usable_cpus
from emergence.core.declared import DECLARATION, instances, interpolate
from emergence.core.pipeline import engine_declaration
from emergence.core.resources import RATE, Sized, device_need_mb, job_workload, on_device, step_seconds

Capacity = Callable[[str], tuple[int, str, bool] | None]  # device -> (MiB, what holds it, is a GPU)


def visible_gpu() -> ModuleType | None:
    """torch.cuda when torch sees a GPU, else None. A CPU build of torch (its version ends in +cpu) sees
    none, which its metadata says without importing torch: ~1.3 s at every check, guard run and Snakemake
    start, which need no torch otherwise."""
    if version("torch").endswith("+cpu"):
        return None
    import torch  # a CUDA or ROCm build: only torch can tell whether a GPU is there

    return torch.cuda if torch.cuda.is_available() else None


def device_memory(device: str) -> tuple[int, str, bool] | None:
    """What the jobs' device holds: the first visible GPU's memory for cuda (None when none is visible:
    a login node cannot tell), else this machine's memory."""
    if device in ("cuda", "auto") and (cuda := visible_gpu()) is not None:
        props = cuda.get_device_properties(0)
        return props.total_memory // 2**20, f"the {props.name}", True
    if device == "cuda":
        return None
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20, "this machine's memory", False


def device_jobs(params: dict, root: Path) -> Iterator[tuple[str, Sized | None]]:
    """(DVC instance, its sizes or None when its declared params give no model size) of every stage
    instance that computes on the device."""
    for name, stage in engine_declaration(root)["stages"].items():
        for instance, item in instances(name, stage, params):
            keys = interpolate(stage.get("params", []), {**params, "item": item}, instance)
            if on_device(keys):
                yield instance, job_workload(params, keys, instance, item)


def training_hours(params: dict, root: Path, device: str) -> float:
    """resources.py's estimate of every device job's training steps on `device`, in hours (no safety
    factor, startup excluded; jobs whose params give no model size count nothing)."""
    return sum(step_seconds(w, device) for _, w in device_jobs(params, root) if w is not None) / 3600


def where_it_runs(params: dict, root: Path) -> list[str]:
    """Where the device jobs will run here and resources.py's estimate of their training hours there,
    said before anything runs; a `warning:` line when base.device asks for a GPU this machine lacks."""
    if not (root / DECLARATION).is_file():
        return []
    device = params["base"]["device"]
    cuda = visible_gpu()
    target = "cuda" if device == "cuda" or (device == "auto" and cuda is not None) else "cpu"
    here = f"the {cuda.get_device_name(0)}" if cuda is not None else "no GPU"
    hours = {d: training_hours(params, root, d) for d in ("cuda", "cpu")}
    line = (
        f"base.device {device}: {target} ({here}, {usable_cpus()} CPU(s) here); resources.py estimates "
        f"{hours[target]:,.1f} h of training at the {RATE[target] / 1e9:,.0f} GFLOP/s it assumes for a {target}"
    )
    if target == "cuda":
        line += f" ({hours['cpu']:,.0f} h on a CPU)"
    missing = missing_device(params)
    return [line] + ([f"warning: {missing} (a GPU node of a cluster has one: run the stages there)"] if missing else [])


def device_job_estimates(params: dict, root: Path = Path("."), on_gpu: bool = True) -> dict[str, int | None]:
    """Each device job's memory estimate in MiB (resources.device_need_mb: without its safety factor),
    by DVC stage instance ("binding_train@0"); None for a job whose declared params give no model size."""
    return {instance: None if w is None else device_need_mb(w, on_gpu) for instance, w in device_jobs(params, root)}


def jobs_fit_the_device(params: dict, root: Path = Path("."), capacity: Capacity = device_memory) -> list[str]:
    """Each device job's memory estimate against the device, refused before anything runs: a
    paper-profile job that cannot fit would otherwise fail at its first step, possibly hours into the
    pipeline. tests/pipeline/test_paper_smoke.py holds the estimates against measured peak memory."""
    base = params.get("base")
    held = capacity(base.get("device", "auto")) if isinstance(base, dict) else None
    if held is None or not (root / DECLARATION).is_file():
        return []
    limit, what, on_gpu = held
    return [
        f"{instance}: resources.py estimates {need:,} MiB (weights, gradients, optimizer moments and "
        f"activations), more than the {limit:,} MiB of {what}; lower its batch_size or context"
        for instance, need in device_job_estimates(params, root, on_gpu).items()
        if need is not None and need > limit
    ]


def missing_device(params: dict) -> str | None:
    """One line when base.device asks for a GPU this machine does not have (torch would fail deep inside
    a stage with "Torch not compiled with CUDA enabled"), else None."""
    base = params.get("base")
    device = base.get("device") if isinstance(base, dict) else None
    if device != "cuda" or visible_gpu() is not None:
        return None
    return f"base.device: cuda, but torch {version('torch')} sees no GPU on this machine; set it to auto or cpu"
