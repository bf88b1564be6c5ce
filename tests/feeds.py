"""What the stage-feed tests share: a working directory holding the tiny profile's params, spies put in
a stage module's namespace, and runs whose checkpoints all differ (so loading the wrong step shows)."""

from __future__ import annotations

import importlib
import shutil
import zlib
from pathlib import Path

import pytest
import safetensors.torch
import torch
import yaml
from conftest import ROOT

from emergence.core.models.registry import build_model
from emergence.core.profile import merge_into
from emergence.core.train.checkpoint import save_checkpoint


def tiny_params(edits: dict | None = None) -> dict:
    """The shipped params at the tiny profile, then `edits` merged in."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    merge_into(params, yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text()))
    assert not merge_into(params, edits or {}), "an edit names a key params.yaml lacks"
    return params


def workspace(tmp: Path, monkeypatch, edits: dict | None = None) -> dict:
    """tmp as the working directory, holding params.yaml (`tiny_params(edits)`)."""
    params = tiny_params(edits)
    (tmp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(tmp)
    return params


def build_upstream(root: Path, edits: dict, stages: list[tuple[str, list[str]]], study: str) -> None:
    """root as a project holding resources/ and params.yaml (`tiny_params(edits)`), after each
    (stage, argv) of stages/<study>/ ran there in order, in-process."""
    shutil.copytree(ROOT / "resources", root / "resources")
    with pytest.MonkeyPatch.context() as mp:
        workspace(root, mp, edits)
        for name, argv in stages:
            assert importlib.import_module(f"stages.{study}.{name}").main(argv) == 0, (name, argv)


def one_error(capsys) -> str:
    """The last line a stage printed on stderr (its one-line refusal)."""
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    return line


class Spy:
    """Stands in for an analysis function: records every call, answers with `answer(*args, **kwargs)`."""

    def __init__(self, answer):
        self.answer, self.calls, self.returned = answer, [], []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        self.returned.append(self.answer(*args, **kwargs))
        return self.returned[-1]

    @property
    def one(self) -> tuple[tuple, dict]:
        assert len(self.calls) == 1, f"{len(self.calls)} calls"
        return self.calls[0]


def spy(monkeypatch, module, name: str, answer) -> Spy:
    s = Spy(answer)
    monkeypatch.setattr(module, name, s)
    return s


def spy_listing(monkeypatch, module, name: str, answer) -> Spy:
    """spy() for an analysis handed a generator of (step, model) first: the spy keeps it as a list."""
    s = Spy(answer)
    monkeypatch.setattr(module, name, lambda first, *rest, **kw: s(list(first), *rest, **kw))
    return s


def save_run(run_dir: Path, steps: list[int], arch: str, config: dict, meta: dict | None = None) -> dict[int, Path]:
    """One checkpoint per step, each with weights of its own (noise on every parameter: some models
    start from zero), drawn under the run's folder and the step as seed."""
    paths = {}
    for step in steps:
        torch.manual_seed(zlib.crc32(f"{run_dir}:{step}".encode()))
        model = build_model(arch, config)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        paths[step] = save_checkpoint(model, run_dir, step, meta or {"run": str(run_dir)})
    return paths


def weights_of(model: torch.nn.Module, step_dir: Path) -> bool:
    """Whether `model` holds exactly the weights saved in `step_dir`."""
    saved = safetensors.torch.load_file(step_dir / "model.safetensors")
    state = model.state_dict()
    return all(torch.equal(state[k].cpu(), v) for k, v in saved.items())


def step_of(model: torch.nn.Module, paths: dict[int, Path]) -> list[int]:
    """The steps of `paths` whose weights `model` holds (exactly one when the right checkpoint was loaded)."""
    return [step for step, path in paths.items() if weights_of(model, path)]


def ran(main, argv: list[str], capsys) -> None:
    """Run a stage in-process; a refusal fails the test with the stage's own error line."""
    code = main(argv)
    assert code == 0, capsys.readouterr().err[-2000:]
