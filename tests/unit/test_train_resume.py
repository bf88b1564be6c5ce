"""Resume, field by field: an interrupted run resumes from its scratch state only when nothing that
determines it changed (every TrainConfig key the loop fingerprints, the model's architecture, config
and initial weights, the data), and then ends with the bytes of a run that never stopped; changed, it
starts fresh and ends as a fresh run would. And what a run resumed after a nan or inf loss does,
under either on_nonfinite policy."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
import types
import typing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import safetensors.torch
import torch
import torch.nn.functional as F
from refusals import refuses
from tiny_models import TinyCfg, TinyModel

from emergence.core.io import PipelineError
from emergence.core.models.registry import build_model, register
from emergence.core.train.batches import epoch_batches
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import train
from emergence.core.train.schedule import checkpoint_steps

pytestmark = pytest.mark.usefixtures("one_thread")


@register("tiny_mlp_gain_test", TinyCfg)
class GainModel(TinyModel):
    """tiny_mlp_test under another architecture name, its logits scaled by an optional `gain` input:
    without one it computes the same function from the same initial weights."""

    def forward(self, idx, targets=None, gain=None):
        logits = super().forward(idx)[0]
        if gain is not None:
            logits = logits * gain
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)


# 10 windows of 6 tokens: batches of 3 leave one window out of every epoch (3 batches an epoch).
WINDOWS = np.random.default_rng(0).integers(0, 8, (10, 6))
# 11 steps: resume states fall due every 3 steps and at the checkpoints 1, 3 and 11 (log-spaced), so at
# 1, 3, 6, 9 and 11; evaluations at 0, 4, 8 and the checkpoints. Dropout draws from a seed of
# (run seed, step), so a resumed step draws its mask anew; what an evaluation draws needs the restored RNG states.
BASE = TrainConfig(steps=11, batch_size=3, lr=0.05, n_log_checkpoints=3, resume_every=3, eval_every=4, device="cpu")
STOP_AT = 8  # the interrupted run dies asking for step 8's batch: its last resume state is step 6's


@dataclasses.dataclass(frozen=True)
class Run:
    """Everything a run is made of: what the loop is handed."""

    cfg: TrainConfig = dataclasses.field(default_factory=lambda: BASE)
    arch: str = "tiny_mlp_test"
    model: tuple = (("dropout", 0.2),)  # TinyCfg keys
    init: int = 0  # the torch seed the initial weights are drawn with
    data: str = "windows-v1"  # the data fingerprint


class Interrupt(Exception):
    pass


def probe(model, step):
    x = torch.from_numpy(WINDOWS[:4])
    return {"eval_loss": model(x[:, :-1], x[:, 1:])[1].item()}


def fit(tmp_path: Path, name: str, run: Run = Run(), *, stop_at=None, diverge=None, at=None, seen=None) -> list[int]:
    """Train `run` into tmp_path/name (scratch tmp_path/name.s); the steps whose batch it asked for
    (appended to `seen` too). stop_at: die asking for that step's batch. diverge at step `at`: "nan
    batch" (every target ignored: a mean over no token is nan, its gradient zero, the weights stay
    finite) or "inf logits" (the logits times inf: a nan loss whose nan gradient makes every weight nan
    from then on)."""
    torch.manual_seed(run.init)
    model = build_model("tiny_mlp_gain_test" if diverge == "inf logits" else run.arch, dict(run.model))
    draw, seen = epoch_batches(WINDOWS, run.cfg.batch_size, run.cfg.seed), [] if seen is None else seen

    def batch_fn(step):
        seen.append(step)
        if step == stop_at:
            raise Interrupt
        idx, targets = draw(step)
        if diverge == "nan batch" and step == at:
            targets = torch.full_like(targets, -1)
        if diverge == "inf logits":
            return {"idx": idx, "gain": torch.tensor(math.inf if step == at else 1.0)}, targets
        return idx, targets

    out, scratch = tmp_path / name, tmp_path / f"{name}.s"
    train(model, batch_fn, run.cfg, out, scratch, eval_fn=probe, data_fingerprint=run.data, progress=False)
    return seen


def interrupted(tmp_path: Path, name: str, run: Run = Run(), **kw) -> int:
    """Run `fit` to its interruption; the step of the resume state it left."""
    with pytest.raises(Interrupt):
        fit(tmp_path, name, run, **kw)
    assert not (tmp_path / name).exists()  # an interrupted run publishes nothing
    return state_step(tmp_path / f"{name}.s")


def state_step(scratch: Path) -> int:
    return json.loads((scratch / "resume" / "state.json").read_text())["step"]


def files(out: Path) -> dict[str, bytes]:
    """Every file a run published, by its path in the run: checkpoints' weights and config.json, metrics."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def diverged_at(out: Path) -> dict[int, int | None]:
    steps = sorted(int(p.name[4:]) for p in out.glob("step*"))
    return {s: json.loads((out / f"step{s}" / "config.json").read_text())["meta"].get("diverged_at") for s in steps}


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> dict[str, bytes]:
    """The files of the run made of Run(), never interrupted."""
    tmp = tmp_path_factory.mktemp("straight")
    fit(tmp, "run")
    return files(tmp / "run")


@pytest.fixture(scope="module")
def left_over(tmp_path_factory) -> Path:
    """The scratch folder of Run() interrupted at STOP_AT: its resume state, its checkpoints so far."""
    tmp = tmp_path_factory.mktemp("left_over")
    assert interrupted(tmp, "run", stop_at=STOP_AT) == 6
    return tmp / "run.s"


def test_the_fixture_runs_are_worth_comparing(straight):
    ckpts = sorted(k for k in straight if k.endswith("model.safetensors"))
    assert ckpts == [f"step{s}/model.safetensors" for s in (0, 1, 11, 3)]
    assert len({straight[k] for k in ckpts}) == len(ckpts)  # every checkpoint holds other weights
    assert "metrics.parquet" in straight


# ---- nothing changed: the bytes of a run that never stopped ---------------------------------------


def resume_points(cfg: TrainConfig) -> set[int]:
    """The steps whose resume state the loop writes: every resume_every steps and at every checkpoint."""
    plan = checkpoint_steps(cfg.steps, cfg.dense_until, cfg.n_log_checkpoints, cfg.checkpoint_every)
    return {s for s in range(1, cfg.steps + 1) if s % cfg.resume_every == 0 or s in plan}


@pytest.mark.parametrize("stop_at", range(BASE.steps))
def test_a_run_resumed_unchanged_ends_with_the_bytes_of_one_never_stopped(tmp_path, straight, stop_at):
    before = [s for s in resume_points(BASE) if s < stop_at]  # the state of stop_at itself is never written
    with pytest.raises(Interrupt):
        fit(tmp_path, "run", stop_at=stop_at)
    assert (tmp_path / "run.s" / "resume").exists() == bool(before)
    seen = fit(tmp_path, "run")
    assert seen[0] == max(before, default=0)  # from the last resume state, not from scratch
    assert files(tmp_path / "run") == straight
    assert not (tmp_path / "run.s").exists()


def test_a_run_interrupted_twice_ends_with_the_bytes_of_one_never_stopped(tmp_path, straight):
    assert interrupted(tmp_path, "run", stop_at=5) == 3
    assert interrupted(tmp_path, "run", stop_at=10) == 9
    assert fit(tmp_path, "run")[0] == 9
    assert files(tmp_path / "run") == straight


def draws(model, step):
    """An evaluation that draws from python's, numpy's and torch's global RNGs (an odd count of gaussians
    each time: python's and numpy's keep every other one cached in their state)."""
    return {"py": random.gauss(0, 1), "np": np.random.standard_normal(), "torch": torch.randn(1).item()}


def drawing(tmp_path: Path, name: str, seed: int = 0, stop_at=None):
    """Run() evaluated at every step with `draws`, under `seed`; its metrics, or Interrupt at `stop_at`."""
    cfg = dataclasses.replace(BASE, eval_every=1, seed=seed)
    torch.manual_seed(0)
    model, draw = build_model("tiny_mlp_test", {"dropout": 0.2}), epoch_batches(WINDOWS, cfg.batch_size, seed)

    def batch_fn(step):
        if step == stop_at:
            raise Interrupt
        return draw(step)

    return train(model, batch_fn, cfg, tmp_path / name, tmp_path / f"{name}.s", eval_fn=draws, progress=False)


@pytest.mark.parametrize("stop_at, state", [(4, 3), (8, 6)])  # after 3 evaluations a gaussian is cached, after 6 none
def test_a_resumed_run_hands_its_evaluations_the_random_draws_of_one_never_stopped(tmp_path, stop_at, state):
    straight = drawing(tmp_path, "straight")
    with pytest.raises(Interrupt):
        drawing(tmp_path, "run", stop_at=stop_at)
    assert state_step(tmp_path / "run.s") == state
    pd.testing.assert_frame_equal(drawing(tmp_path, "run"), straight)


def test_the_random_draws_a_run_hands_its_evaluations_follow_its_seed(tmp_path):
    first, again, other = (drawing(tmp_path, name, seed) for name, seed in (("a", 5), ("b", 5), ("c", 6)))
    pd.testing.assert_frame_equal(first, again)
    assert all(first[key].iloc[0] != other[key].iloc[0] for key in ("py", "np", "torch"))  # from the first one


# ---- one thing changed: a fresh run -----------------------------------------------------------------

# TrainConfig keys deliberately left out of the fingerprint (and the checkpoints' meta). on_nonfinite is
# a policy, not part of the run: the bits are the same until a loss goes non-finite, so a run stopped
# by `stop` resumes under `continue` (loop.py, docs/hardening.md).
NOT_FINGERPRINTED = {"on_nonfinite"}
# Values no rule of `another` derives from the field's type.
GIVEN = {"device": "auto"}  # resolves to the CPU here (the test hides any GPU): another key, the same device


def another(value: typing.Any, hint: typing.Any, name: str) -> typing.Any:
    """A value other than `value` of a field declared `hint`: another choice, the other bool, one more,
    half (0.5 for 0), each item of a tuple so; GIVEN where the type gives no rule."""
    if name in GIVEN:
        return GIVEN[name]
    if typing.get_origin(hint) is typing.Annotated:
        return another(value, typing.get_args(hint)[0], name)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return next(choice for choice in args if choice != value)
    if origin in (typing.Union, types.UnionType) and value is not None:
        return another(value, next(a for a in args if a is not type(None)), name)
    if origin is tuple:
        return tuple(another(v, a, name) for v, a in zip(value, args, strict=True))
    if hint is bool:
        return not value
    if hint is int:
        return value + 1
    if hint is float:
        return value / 2 if value else 0.5
    raise AssertionError(f"{name}: no rule gives another {hint}: add a valid changed value to GIVEN")


TRAIN_HINTS = typing.get_type_hints(TrainConfig, include_extras=True)
TRAIN_KEYS = [f.name for f in dataclasses.fields(TrainConfig)]
MODEL_KEYS = [f.name for f in dataclasses.fields(TinyCfg)]


def changed(what: str) -> Run:
    """Run() with one thing changed: `train.<key>`, `model.<key>`, `arch`, `init` or `data`."""
    base = Run()
    if what.startswith("train."):
        key = what.removeprefix("train.")
        cfg = dataclasses.replace(BASE, **{key: another(getattr(BASE, key), TRAIN_HINTS[key], key)})
        cfg.validate()  # a valid value: the run is refused for nothing but its resume state
        return dataclasses.replace(base, cfg=cfg)
    if what.startswith("model."):
        key = what.removeprefix("model.")
        config = TinyCfg(**dict(base.model))
        hint = typing.get_type_hints(TinyCfg)[key]
        return dataclasses.replace(
            base, model=tuple({**dict(base.model), key: another(getattr(config, key), hint, key)}.items())
        )
    return {
        "arch": dataclasses.replace(base, arch="tiny_mlp_gain_test"),  # the same function and initial weights
        "init": dataclasses.replace(base, init=1),
        "data": dataclasses.replace(base, data="windows-v2"),
    }[what]


FINGERPRINTED = (
    [f"train.{key}" for key in TRAIN_KEYS if key not in NOT_FINGERPRINTED]
    + [f"model.{key}" for key in MODEL_KEYS]
    + ["arch", "init", "data"]
)


@pytest.fixture
def cpu_and_quick_compile(monkeypatch):
    """device auto resolves to the CPU; torch.compile hands back the model (a real compile would take
    longer than this whole file; the compiled run's own resume is tested in test_train_precision.py)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch, "compile", lambda model, mode: model)


@pytest.mark.usefixtures("cpu_and_quick_compile")
@pytest.mark.parametrize("what", FINGERPRINTED)
def test_a_run_resumed_with_one_thing_changed_starts_fresh_and_ends_as_a_fresh_run(tmp_path, left_over, what):
    run = changed(what)
    assert run != Run()
    shutil.copytree(left_over, tmp_path / "run.s")
    assert fit(tmp_path, "run", run)[0] == 0  # not from the old run's resume state of step 6
    fit(tmp_path, "fresh", run)
    assert files(tmp_path / "run") == files(tmp_path / "fresh")  # no checkpoint of the old run left in


def test_every_model_config_key_and_every_train_key_but_the_policy_is_in_the_run(straight):
    meta = json.loads(straight["step11/config.json"])
    assert set(meta["meta"]["train"]) == set(TRAIN_KEYS) - NOT_FINGERPRINTED == set(TRAIN_KEYS) - {"on_nonfinite"}
    assert set(meta["config"]) == set(MODEL_KEYS)


@pytest.mark.parametrize("key", sorted(NOT_FINGERPRINTED))
def test_a_run_resumed_with_a_key_outside_the_fingerprint_changed_resumes_to_the_same_bytes(
    tmp_path, left_over, straight, key
):
    run = dataclasses.replace(
        Run(), cfg=dataclasses.replace(BASE, **{key: another(getattr(BASE, key), TRAIN_HINTS[key], key)})
    )
    shutil.copytree(left_over, tmp_path / "run.s")
    assert fit(tmp_path, "run", run)[0] == 6
    assert files(tmp_path / "run") == straight


# ---- after a nan or inf loss ------------------------------------------------------------------------

KINDS = ("nan batch", "inf logits")
AT = 7  # the diverging step: the last resume state before it is step 6's, the next written one step 9's


def with_train(**kw) -> Run:
    """Run() with these TrainConfig keys."""
    return dataclasses.replace(Run(), cfg=dataclasses.replace(BASE, **kw))


CONTINUE = with_train(on_nonfinite="continue")


def weights_in_state(scratch: Path) -> dict[str, torch.Tensor]:
    tensors = safetensors.torch.load_file(str(scratch / "resume" / "state.safetensors"))
    return {k: v for k, v in tensors.items() if k.startswith("model/")}


@pytest.mark.parametrize("kind", KINDS)
def test_a_diverged_run_resumed_under_stop_stops_again_at_the_same_step_from_the_state_before_it(tmp_path, kind):
    resume = tmp_path / "run.s" / "resume"
    with refuses("step 7", "step 6", resume):
        fit(tmp_path, "run", diverge=kind, at=AT)
    kept = {p.name: p.read_bytes() for p in resume.iterdir()}
    assert state_step(tmp_path / "run.s") == 6
    assert all(torch.isfinite(t).all() for t in weights_in_state(tmp_path / "run.s").values())
    seen = []
    with refuses("step 7", "step 6", resume):
        fit(tmp_path, "run", diverge=kind, at=AT, seen=seen)
    assert seen[0] == 6 and seen[-1] == AT  # from the state kept, to the same step
    assert {p.name: p.read_bytes() for p in resume.iterdir()} == kept  # neither replaced nor poisoned
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_stopped_by_a_divergence_resumed_under_continue_ends_as_one_never_stopped(tmp_path, kind):
    with pytest.raises(PipelineError):
        fit(tmp_path, "run", diverge=kind, at=AT)
    assert fit(tmp_path, "run", CONTINUE, diverge=kind, at=AT)[0] == 6
    fit(tmp_path, "straight", CONTINUE, diverge=kind, at=AT)
    assert files(tmp_path / "run") == files(tmp_path / "straight")
    assert diverged_at(tmp_path / "run") == {0: None, 1: None, 3: None, 11: AT}
    final = safetensors.torch.load_file(str(tmp_path / "run" / "step11" / "model.safetensors"))
    assert all(torch.isfinite(t).all() for t in final.values()) == (kind == "nan batch")


@pytest.mark.parametrize("kind", KINDS)
def test_a_continued_run_interrupted_past_its_divergence_resumes_exactly_and_still_records_it(tmp_path, kind):
    assert interrupted(tmp_path, "run", CONTINUE, diverge=kind, at=AT, stop_at=10) == 9  # written past step 7
    assert fit(tmp_path, "run", CONTINUE, diverge=kind, at=AT)[0] == 9
    fit(tmp_path, "straight", CONTINUE, diverge=kind, at=AT)
    assert files(tmp_path / "run") == files(tmp_path / "straight")
    assert diverged_at(tmp_path / "run")[11] == AT  # step 11 was saved after the resume


@pytest.mark.parametrize("kind", KINDS)
def test_a_continued_run_resumed_under_stop_past_its_divergence_stops_naming_the_diverged_step(tmp_path, kind):
    # A state written under continue after the nan loss is one a run under stop never reaches: resumed
    # under stop it stops at once, naming the first non-finite step, and publishes nothing.
    assert interrupted(tmp_path, "run", CONTINUE, diverge=kind, at=AT, stop_at=10) == 9
    resume = tmp_path / "run.s" / "resume"
    kept = {p.name: p.read_bytes() for p in resume.iterdir()}
    seen = []
    with refuses("step 7", resume, "on_nonfinite: continue"):
        fit(tmp_path, "run", diverge=kind, at=AT, seen=seen)
    assert seen == [] and not (tmp_path / "run").exists()  # not one more update
    assert {p.name: p.read_bytes() for p in resume.iterdir()} == kept
    fit(tmp_path, "run", CONTINUE, diverge=kind, at=AT)  # what the message advises: continue, from step 9
    fit(tmp_path, "straight", CONTINUE, diverge=kind, at=AT)
    assert files(tmp_path / "run") == files(tmp_path / "straight")


def test_a_huge_lr_diverges_at_step_1_and_a_lower_lr_then_starts_fresh(tmp_path, straight):
    # AdamW's first update moves every parameter with a gradient by about lr: at lr 1e20 the product of
    # two (the LayerNorm gain and the head, 1e40) overflows float32, so step 1's loss is nan, before any
    # resume state was written (the first falls due at step 1).
    huge = with_train(lr=1e20)
    for _ in range(2):  # the same again on a rerun: nothing kept to resume from
        with refuses("step 1", "lr 1e+20"):
            fit(tmp_path, "run", huge)
        assert not (tmp_path / "run.s" / "resume").exists() and (tmp_path / "run.s" / "step1").exists()
    assert fit(tmp_path, "run")[0] == 0  # lr 0.05, as lowering it in the params would
    assert files(tmp_path / "run") == straight  # step1 of the lr 1e20 run is not published
