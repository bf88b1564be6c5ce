"""Checkpoints (published artifacts) and resume state (internal scratch file).

A checkpoint is a directory `step{N}/` with `model.safetensors` (weights) and
`config.json` (format tag, architecture, model config, step, meta), enough to
rebuild the model with no training code. Resume state is a folder of
safetensors + JSON holding everything the loop needs to continue bit-exactly,
tagged with a fingerprint of the run so a changed config never resumes from a
stale run; a damaged one is all or nothing (restored whole, or nothing touched).
"""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import random
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
import torch.nn as nn
from safetensors import SafetensorError

from emergence.core.io import PipelineError, atomic_path, finite, remove_tree, write_json
from emergence.core.models.registry import build_model, model_spec

FORMAT = "emergence-checkpoint-v1"
WEIGHTS, CONFIG = "model.safetensors", "config.json"
_STEP_DIR = re.compile(r"step(\d+)")


def step_dirname(step: int) -> str:
    return f"step{step}"


def save_checkpoint(model: nn.Module, path_dir: str | os.PathLike, step: int, meta: dict) -> Path:
    """Write `{path_dir}/step{step}/` atomically and return its path."""
    step_dir = Path(path_dir) / step_dirname(step)
    config = {"format": FORMAT, **model_spec(model), "step": step, "meta": meta}
    try:
        with atomic_path(step_dir) as tmp:
            tmp.mkdir()
            # save_model drops duplicate names of tied weights (safetensors forbids shared storage).
            safetensors.torch.save_model(model, str(tmp / WEIGHTS))
            write_json(config, tmp / CONFIG)
    except (OSError, SafetensorError) as e:
        needed = sum(t.numel() * t.element_size() for t in model.state_dict().values())
        raise write_failed(
            step_dir, "checkpoint", needed, e, "nothing half-written is left; free space and run again"
        ) from e
    return step_dir


def load_checkpoint(step_dir: str | os.PathLike, device: str = "cpu") -> tuple[nn.Module, dict]:
    """Rebuild the model saved in `step_dir`; returns (model in eval mode, config.json dict)."""
    step_dir = Path(step_dir)
    weights, config_path = step_dir / WEIGHTS, step_dir / CONFIG
    if not step_dir.is_dir():
        raise PipelineError(f"{step_dir}: checkpoint directory not found")
    for path in (config_path, weights):
        if not path.is_file():
            raise PipelineError(f"{path}: file not found")
    info = _read_config(config_path)
    model = build_model(info["arch"], info["config"], where=str(config_path))
    try:
        safetensors.torch.load_model(model, weights, strict=True)
    except (SafetensorError, OSError) as e:
        raise PipelineError(f"{weights}: unreadable or truncated safetensors file ({e})") from e
    except RuntimeError as e:  # missing/unexpected keys or shape mismatch
        detail = " ".join(str(e).split())
        raise PipelineError(f"{weights}: weights do not match architecture '{info['arch']}': {detail}") from e
    if diverged_at(info) is None:  # else the run trained on past a nan loss on purpose (on_nonfinite: continue)
        for name, tensor in model.state_dict().items():
            finite(tensor, weights, f"tensor '{name}'")
    return model.to(device).eval(), info


def _read_config(path: Path) -> dict:
    try:
        info = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PipelineError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise PipelineError(f"{path}: foreign checkpoint (expected format '{FORMAT}')")
    for key, kind in (("arch", str), ("config", dict), ("step", int)):
        if not isinstance(info.get(key), kind):
            raise PipelineError(f"{path}: key '{key}' missing or not a {kind.__name__}")
    return info


def diverged_at(info: dict) -> int | None:
    """The first step whose loss was nan or inf, as the loop records it in the meta of every later
    checkpoint (on_nonfinite: continue); None for a run that stayed finite. `info`: a config.json dict."""
    meta = info.get("meta")
    step = meta.get("diverged_at") if isinstance(meta, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def list_checkpoints(run_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """All `step{N}` directories of a run, sorted by step; refused when they are not all of one run."""
    found = step_dirs(run_dir)
    _one_run(found)
    return found


def step_dirs(run_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """All `step{N}` directories in `run_dir`, sorted by step, whatever run wrote them (what the loop
    publishes or clears from its own scratch)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise PipelineError(f"{run_dir}: run directory not found")
    return sorted((int(m.group(1)), p) for p in run_dir.iterdir() if p.is_dir() and (m := _STEP_DIR.fullmatch(p.name)))


def _one_run(ckpts: list[tuple[int, Path]]) -> None:
    """The checkpoints of a run share its model, training config and data (config.json): a step folder
    copied in from another run (another model, another corpus) would be analysed as this run's."""
    runs: dict[str, list[Path]] = {}
    for _, path in ckpts:
        try:
            info = json.loads((path / CONFIG).read_text())
            meta = {k: v for k, v in info["meta"].items() if k != "diverged_at"}  # set from a step on, on purpose
            key = json.dumps([info["arch"], info["config"], meta], sort_keys=True)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # unreadable: load_checkpoint names it when it is read
        runs.setdefault(key, []).append(path)
    if len(runs) > 1:
        odd = min(runs.values(), key=len)
        most = max(len(paths) for paths in runs.values())
        raise PipelineError(
            f"{odd[0] / CONFIG}: from another run (model, training config or data differ from the other {most} "
            f"checkpoints of {odd[0].parent}): remove it, or rerun the stage that trains the run"
        )


def find_checkpoint(run_dir: str | os.PathLike, name: str, where: str = "checkpoint") -> tuple[int, Path]:
    """(step, path) of checkpoint `name` in a run: "final" (the last one) or "step{N}"."""
    ckpts = list_checkpoints(run_dir)
    if not ckpts:
        raise PipelineError(f"{run_dir}: no step{{N}} checkpoints in the run directory")
    if name == "final":
        return ckpts[-1]
    for step, path in ckpts:
        if path.name == name:
            return step, path
    raise PipelineError(f"{where}: no checkpoint '{name}' in {run_dir} (use final or step{{N}})")


def load_named_checkpoint(run_dir: str | os.PathLike, name: str, where: str = "checkpoint") -> tuple[int, nn.Module]:
    """(step, model in eval mode) of checkpoint `name` ("final" or "step{N}") of a run."""
    step, path = find_checkpoint(run_dir, name, where)
    return step, load_checkpoint(path)[0]


def publish_run(scratch_dir: Path, out_dir: Path, files: list[str]) -> None:
    """Atomically make `out_dir` hold scratch's checkpoints plus `files`.

    Hard links (copies across file systems) rather than moves, so a crash
    mid-publish leaves scratch intact and the run can simply publish again.
    """
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        for _, step_dir in step_dirs(scratch_dir):
            shutil.copytree(step_dir, tmp / step_dir.name, copy_function=_link_or_copy)
        for name in files:
            _link_or_copy(scratch_dir / name, tmp / name)


def _link_or_copy(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def clear_run_files(run_dir: Path, files: list[str]) -> None:
    """Remove the checkpoints and `files` of a run from `run_dir` (only what the loop writes)."""
    if not run_dir.is_dir():
        return
    for _, step_dir in step_dirs(run_dir):
        remove_tree(step_dir)
    for name in files:
        target = run_dir / name
        if target.is_dir():
            remove_tree(target)
        else:
            target.unlink(missing_ok=True)
    if not any(run_dir.iterdir()):
        run_dir.rmdir()


# ---- resume state ---------------------------------------------------------


def run_fingerprint(train_config: dict, model: nn.Module, data_fingerprint: str) -> str:
    """Hash of everything that determines a run: train config, model spec and
    initial weights, data. Resume is only allowed when it matches."""
    weights = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        weights.update(name.encode())
        weights.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    blob = {"train": train_config, "model": model_spec(model), "init": weights.hexdigest(), "data": data_fingerprint}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


STATE_TENSORS, STATE_JSON = "state.safetensors", "state.json"


@dataclass(frozen=True)
class ResumeState:
    """Everything the loop needs to continue from a step, captured in memory and written later (the loop
    writes it only once that step's loss has turned out finite): tensors for safetensors, JSON for the rest."""

    tensors: dict[str, torch.Tensor]
    meta_json: str

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values()) + len(self.meta_json.encode())


def capture_resume_state(
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    step: int,
    tokens: int,
    rows: list[dict],
    fingerprint: str,
) -> ResumeState:
    """Copy the model, optimizer moments, RNG states and the rows so far. Nothing is pickled, so a state
    file planted in a shared workspace cannot run code."""
    tensors = {f"model/{k}": v.detach().clone().contiguous().cpu() for k, v in model.state_dict().items()}
    optim = optimizer.state_dict()
    scalars: dict[str, dict] = {}  # per parameter index: its non-tensor state (JSON)
    for idx, entry in optim["state"].items():
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optim/{idx}/{name}"] = value.detach().clone().contiguous().cpu()
            else:
                scalars.setdefault(str(idx), {})[name] = value
    tensors["rng/torch"] = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    tensors.update({f"rng/cuda/{i}": s for i, s in enumerate(cuda)})
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    tensors["rng/numpy_keys"] = torch.from_numpy(np_keys.astype(np.int64))
    py_version, py_state, py_gauss = random.getstate()
    meta = {
        "format": "emergence-resume-1",
        "fingerprint": fingerprint,
        "step": step,
        "tokens": tokens,
        "rows": rows,
        "optim_scalars": scalars,
        "param_groups": optim["param_groups"],
        "n_cuda": len(cuda),
        "rng_numpy": [np_name, int(np_pos), int(np_has_gauss), float(np_gauss)],
        "rng_python": [py_version, list(py_state), py_gauss],
    }
    return ResumeState(tensors, json.dumps(meta))  # JSON now: later rows must not leak in


def write_resume_state(path: Path, state: ResumeState) -> None:
    """Atomically replace the resume state at `path`; when the disk is full (or any write fails) the
    previous one stays whole, and the failure is one line with the bytes needed and free."""
    try:
        with atomic_path(path) as tmp:
            tmp.mkdir()
            safetensors.torch.save_file(state.tensors, str(tmp / STATE_TENSORS))
            (tmp / STATE_JSON).write_text(state.meta_json)
    except (OSError, SafetensorError) as e:
        kept = "the previous resume state is kept" if path.exists() else "no earlier resume state exists"
        raise write_failed(path, "resume state", state.nbytes(), e, f"{kept}; free space and run again") from e


def save_resume_state(path: Path, **state) -> None:
    """Capture and write at once (keyword arguments of capture_resume_state)."""
    write_resume_state(path, capture_resume_state(**state))


def write_failed(path: Path, what: str, needed: int, error: Exception, then: str) -> PipelineError:
    """One line for a failed write (a full disk, most often): the path, the bytes it needed, the bytes free."""
    # An OSError by its reason alone: io.atomic_path's WriteFailed already names the path in its text.
    text = error.strerror if isinstance(error, OSError) and error.strerror else " ".join(str(error).split())
    full = (isinstance(error, OSError) and error.errno == errno.ENOSPC) or "StorageFull" in text
    cause = "no space left on device" if full or "No space left" in text else text
    where = next((p for p in Path(path).absolute().parents if p.exists()), Path("/"))
    try:
        free = f", {shutil.disk_usage(where).free:,} free"
    except OSError:
        free = ""
    return PipelineError(f"{path}: cannot write the {what}: {cause} (needs {needed:,} bytes{free}); {then}")


def load_resume_state(
    path: Path, fingerprint: str, model: nn.Module, optimizer: torch.optim.Optimizer, device: str
) -> dict | None:
    """Restore model, optimizer and RNGs from `path` into place and return
    {"step", "tokens", "rows"}; None (after saying why) when starting fresh."""
    if not path.exists():
        return None
    try:
        meta = json.loads((path / STATE_JSON).read_text(encoding="utf-8"))
        tensors = safetensors.torch.load_file(str(path / STATE_TENSORS))
    except Exception as e:  # any unreadable state (a file, a foreign format) just means "start over"
        _say(f"{path}: unreadable resume state ({e.__class__.__name__}); starting fresh")
        return None
    if not isinstance(meta, dict) or meta.get("fingerprint") != fingerprint:
        _say(f"{path}: resume state is from a different run (fingerprint mismatch); starting fresh")
        return None
    before = _snapshot(model, optimizer)  # put back if the state turns out unusable halfway
    try:
        _restore(meta, tensors, model, optimizer, device)
        resumed = {key: meta[key] for key in ("step", "tokens", "rows")}
        if not (_count(resumed["step"]) and _count(resumed["tokens"]) and isinstance(resumed["rows"], list)):
            raise ValueError("step, tokens or rows")
    except (KeyError, ValueError, RuntimeError, TypeError, OverflowError, IndexError, AttributeError) as e:
        _put_back(before, model, optimizer)
        _say(f"{path}: unreadable resume state ({e.__class__.__name__}); starting fresh")
        return None
    _say(f"{path}: resuming from step {resumed['step']}")
    return resumed


def _restore(meta: dict, tensors: dict[str, torch.Tensor], model: nn.Module, optimizer, device: str) -> None:
    """Model, optimizer and RNGs from a resume state (raises on anything missing or malformed)."""
    model.load_state_dict({k[len("model/") :]: v for k, v in tensors.items() if k.startswith("model/")})
    state: dict[int, dict] = {int(i): dict(values) for i, values in meta["optim_scalars"].items()}
    for key, value in tensors.items():
        if key.startswith("optim/"):
            _, idx, name = key.split("/", 2)
            state.setdefault(int(idx), {})[name] = value.to(device)
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    torch.set_rng_state(tensors["rng/torch"])
    if meta["n_cuda"]:
        torch.cuda.set_rng_state_all([tensors[f"rng/cuda/{i}"] for i in range(meta["n_cuda"])])
    name, pos, has_gauss, gauss = meta["rng_numpy"]
    np.random.set_state((name, tensors["rng/numpy_keys"].numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, py_state, py_gauss = meta["rng_python"]
    random.setstate((version, tuple(py_state), py_gauss))


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _snapshot(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return (
        copy.deepcopy(model.state_dict()),
        copy.deepcopy(optimizer.state_dict()),
        (torch.get_rng_state(), cuda, np.random.get_state(), random.getstate()),
    )


def _put_back(before: tuple, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    weights, optim, (torch_rng, cuda, np_rng, py_rng) = before
    model.load_state_dict(weights)
    optimizer.load_state_dict(optim)
    torch.set_rng_state(torch_rng)
    if cuda:
        torch.cuda.set_rng_state_all(cuda)
    np.random.set_state(np_rng)
    random.setstate(py_rng)


def _say(message: str) -> None:
    print(message, file=sys.stderr)
