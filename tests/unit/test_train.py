"""Schedules, config validation, and the training loop: learning, clipping,
publication, and bit-exact resume after an exception or a SIGKILL."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import re
import subprocess
import sys
import tracemalloc

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import assert_names, assert_refused, refuses, refuses_key
from tiny_models import tiny

from emergence.core.config import from_dict
from emergence.core.io import PipelineError, read_parquet
from emergence.core.train.checkpoint import list_checkpoints, load_checkpoint
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import train
from emergence.core.train.schedule import checkpoint_steps, lr_factor

VOCAB, B, T = 8, 4, 6


# ---- schedules --------------------------------------------------------------


def test_warmup_rises_linearly_to_peak():
    for kind in ("constant", "linear", "cosine"):
        assert [lr_factor(s, 100, 4, kind) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
        assert lr_factor(4, 100, 4, kind) == 1.0


def test_constant_ignores_min_ratio():
    assert {lr_factor(s, 10, 0, "constant", 0.3) for s in range(11)} == {1.0}


@pytest.mark.parametrize("kind, mid", [("linear", 0.55), ("cosine", 0.55)])
def test_decay_endpoints_and_shape(kind, mid):
    total, warmup, floor = 110, 10, 0.1
    curve = [lr_factor(s, total, warmup, kind, floor) for s in range(warmup, total + 1)]
    assert curve[0] == 1.0 and curve[-1] == pytest.approx(floor)
    assert curve[50] == pytest.approx(mid)  # halfway through decay: both sit at (1 + floor) / 2
    assert all(a > b for a, b in zip(curve, curve[1:]))
    # cosine decays slowly at first
    assert lr_factor(35, total, warmup, "cosine", floor) > lr_factor(35, total, warmup, "linear", floor)


@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_decay_ends_at_zero_by_default_and_stays_at_its_floor_past_the_last_step(kind):
    assert lr_factor(20, 20, 4, kind) == pytest.approx(0.0)  # no min_ratio given: down to 0
    assert lr_factor(25, 20, 4, kind, 0.1) == pytest.approx(0.1)  # past total: held at the floor
    # a decay phase of one update: the floor is reached at `total`, not half-way to it
    assert lr_factor(5, 5, 4, kind, 0.1) == pytest.approx(0.1) and lr_factor(4, 5, 4, kind, 0.1) == 1.0


def test_unknown_schedule():
    with refuses("'step'", "cosine", error=ValueError):  # the schedule asked for, and those known
        lr_factor(0, 10, 0, "step")


PROFILE_PLANS = {  # (steps, dense_until, n_log_checkpoints, checkpoint_every) of the shipped training sections
    "binding default": (13000, 0, 30, 500),
    "binding paper": (105469, 0, 60, 5000),
    "binding tiny": (30, 0, 4, 10),
    "grounding default": (1500, 0, 12, 150),
    "grounding paper": (20000, 0, 30, 1000),
    "grounding tiny": (12, 0, 3, 0),
    "visual default": (600, 0, 8, 100),
    "assoc default": (300, 20, 30, 10),
    "assoc paper": (3200, 20, 30, 160),
}


@pytest.mark.parametrize(
    "plan, steps",
    [
        # n_log points round(total ** (i / (n_log - 1))): 30 ** (1/3) = 3.107 -> 1, 3, 10, 30; every 10th
        ((30, 0, 4, 10), [0, 1, 3, 10, 20, 30]),
        ((12, 0, 3, 0), [0, 1, 3, 12]),  # 12 ** 0.5 = 3.46
        ((100, 5, 3, 0), [0, 1, 2, 3, 4, 5, 10, 100]),  # dense 1..5, then 1, 10, 100
        ((10, 0, 0, 3), [0, 3, 6, 9, 10]),  # multiples of 3 that do not divide 10, and the last step
        ((7, 0, 1, 0), [0, 1, 7]),  # one log point: step 1
        ((1, 0, 0, 0), [0, 1]),
    ],
)
def test_checkpoint_steps_by_hand(plan, steps):
    from emergence.core.train.schedule import CheckpointPlan

    assert checkpoint_steps(*plan) == steps
    assert CheckpointPlan(*plan).count() == len(steps)
    assert [s for s in range(-1, plan[0] + 2) if s in CheckpointPlan(*plan)] == steps


def assert_plan_rules(total: int, dense: int, n_log: int, every: int) -> None:
    """Each rule's steps are there (the first and last, the dense ones, every `every`-th, the log-spaced
    ones' first), no step beyond the rules' count; counting, listing and membership agree."""
    from emergence.core.train.schedule import CheckpointPlan

    steps = checkpoint_steps(total, dense, n_log, every)
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == total
    assert set(range(1, min(dense, total) + 1)) | set(range(every, total + 1, every or total + 1)) <= set(steps)
    assert (1 in steps) == (n_log > 0 or dense > 0 or every == 1 or total == 1)
    assert len(steps) <= 2 + dense + n_log + (total // every if every else 0)
    plan = CheckpointPlan(total, dense, n_log, every)
    assert plan.count() == len(steps) and [s for s in range(-1, total + 2) if s in plan] == steps


@pytest.mark.parametrize("plan", PROFILE_PLANS.values(), ids=PROFILE_PLANS.keys())
def test_checkpoint_plan_keeps_every_rule_of_the_profiles_checkpoints(plan):
    assert_plan_rules(*plan)


def test_checkpoint_plan_keeps_every_rule_everywhere():
    rng = np.random.default_rng(0)
    for _ in range(300):
        total = int(rng.integers(1, 2000))
        assert_plan_rules(
            total, int(rng.integers(0, 40)), int(rng.integers(0, 40)), int(rng.choice([0, 1, 2, 3, 7, 150]))
        )


def test_checkpoint_plan_never_lists_every_step():
    from emergence.core.train.schedule import CheckpointPlan

    plan = CheckpointPlan(10**12, dense_until=0, n_log=30, every=10)
    sparse = {0, 10**12} | {round(((10**12) ** (1 / 29)) ** i) for i in range(30)}  # first, last, log-spaced
    assert plan.count() == 10**11 + len({s for s in sparse if s % 10 or s == 0})  # + the multiples of 10
    assert 10**12 - 10 in plan and 10**12 - 11 not in plan and 10**12 in plan and 10**12 + 10 not in plan
    assert list(itertools.islice(plan, 6)) == sorted({s for s in sparse if s < 20} | {10})[:6]


def test_the_loop_does_not_materialise_the_plan(tmp_path):
    # 3 million steps saving every one: a plan held as a set of steps costs ~200 MB before step 0.
    run(tmp_path, "warm", steps=2, n_log_checkpoints=0, eval_every=0)  # lazy imports and caches, once
    tracemalloc.start()
    try:
        with pytest.raises(Interrupt):
            run(tmp_path, fail_at=0, steps=3_000_000, checkpoint_every=1, n_log_checkpoints=0, eval_every=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5e6, peak


def test_checkpoint_steps_contents():
    steps = checkpoint_steps(1000, dense_until=5, n_log=4, every=300)
    assert steps == [0, 1, 2, 3, 4, 5, 10, 100, 300, 600, 900, 1000]
    assert checkpoint_steps(50, dense_until=0, n_log=0, every=0) == [0, 50]
    assert checkpoint_steps(3, dense_until=10, n_log=0, every=0) == [0, 1, 2, 3]
    dedup = checkpoint_steps(10, dense_until=0, n_log=30, every=0)  # more log points than steps
    assert dedup == list(range(11))


# ---- config -----------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"optimizer": "adam"},
        {"steps": 0},
        {"lr": -1.0},
        {"lr": float("nan")},  # no bound admits nan
        {"schedule": "step"},
        {"warmup_steps": 20},  # more than steps
        {"grad_clip": 0.0},
        {"betas": (0.9, 1.5)},
        {"device": "tpu"},
        {"batch_size": True},  # a bool is no count
        {"seed": 2**32},
        {"resume_every": 0},  # a resume state every 0 steps: no such period
    ],
    ids=str,
)
def test_a_config_built_in_code_is_refused_naming_the_key_and_value(change):
    cfg = dataclasses.replace(TrainConfig(steps=10, batch_size=2, lr=1e-3), **change)
    ((key, value),) = change.items()
    with refuses_key(f"train.{key}", value):
        cfg.validate()


@pytest.mark.parametrize(
    "change",
    [
        {"warmup_steps": 10},  # warmup over the whole run: the last update at the peak lr
        {"betas": (0.0, 0.0)},
        {"momentum": 0.0},
        {"min_lr_ratio": 1.0},
        {"device": "cuda:1"},
        {"resume_every": 1},
        {"seed": 2**32 - 1},
    ],
    ids=str,
)
def test_a_config_at_the_edge_of_each_bound_is_accepted(change):
    dataclasses.replace(TrainConfig(steps=10, batch_size=2, lr=1e-3), **change).validate()


def test_from_params():
    cfg = from_dict(TrainConfig, {"steps": 5, "batch_size": 2, "lr": 0.1, "betas": [0.8, 0.9]}, "study.train")
    assert cfg.betas == (0.8, 0.9)
    with refuses_key("study.train.lrr", rule="unknown"):
        from_dict(TrainConfig, {"steps": 5, "batch_size": 2, "lrr": 0.1}, "study.train")
    with refuses_key("train.lr", rule="missing"):
        from_dict(TrainConfig, {"steps": 5, "batch_size": 2}, "train")
    with refuses_key("train.optimizer", "'adam'", "one of adamw, sgd"):
        from_dict(TrainConfig, {"steps": 5, "batch_size": 2, "lr": 0.1, "optimizer": "adam"}, "train")


# ---- the loop ---------------------------------------------------------------


def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token task `t -> t + 1 mod VOCAB`, a pure function of the step."""
    gen = torch.Generator().manual_seed(10_000 + step)
    idx = torch.randint(VOCAB, (B, T), generator=gen)
    targets = (idx + 1) % VOCAB
    targets[:, 0] = -1  # ignored positions must not break anything
    return idx, targets


def config(**overrides) -> TrainConfig:
    base = dict(steps=12, batch_size=B, lr=0.05, n_log_checkpoints=4, resume_every=3, eval_every=5, device="cpu")
    return TrainConfig(**{**base, **overrides})


def probe(model, step):
    assert not model.training and not torch.is_grad_enabled()
    idx, targets = batches(-1)
    return {"eval_loss": model(idx, targets)[1].item()}


class Interrupt(Exception):
    pass


def run(tmp_path, name="run", fail_at=None, kill_at=None, nan_at=None, seen=None, model_kw=None, **overrides):
    """Train a fresh tiny model into tmp_path/name; optionally die at step `fail_at`/`kill_at`, or
    make the loss nan at step `nan_at` (every target ignored: a mean over no token)."""
    model = tiny(seed=0, **(model_kw or {"dropout": 0.2}))

    def batch_fn(step):
        assert model.training  # eval_fn must hand the model back in train mode
        if seen is not None:
            seen.append(step)
        if step == fail_at:
            raise Interrupt
        if step == kill_at:
            os.kill(os.getpid(), 9)
        idx, targets = batches(step)
        return (idx, torch.full_like(targets, -1)) if step == nan_at else (idx, targets)

    metrics = train(
        model,
        batch_fn,
        config(**overrides),
        tmp_path / name,
        tmp_path / f"{name}.scratch",
        eval_fn=probe,
        data_fingerprint="next-token-v1",
        progress=False,
    )
    return model, metrics


def assert_same_run(dir_a, dir_b):
    ckpts_a, ckpts_b = list_checkpoints(dir_a), list_checkpoints(dir_b)
    assert [s for s, _ in ckpts_a] == [s for s, _ in ckpts_b]
    for (_, a), (_, b) in zip(ckpts_a, ckpts_b):
        state_a, state_b = load_checkpoint(a)[0].state_dict(), load_checkpoint(b)[0].state_dict()
        assert state_a.keys() == state_b.keys()
        assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)
        assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (dir_a / "metrics.parquet").read_bytes() == (dir_b / "metrics.parquet").read_bytes()


def test_run_publishes_checkpoints_and_metrics(tmp_path):
    model, metrics = run(tmp_path)
    out = tmp_path / "run"
    assert sorted(p.name for p in out.iterdir()) == ["metrics.parquet"] + [f"step{s}" for s in (0, 1, 12, 2, 5)]
    assert not (tmp_path / "run.scratch").exists()
    disk = read_parquet(out / "metrics.parquet", {"step": "i", "tokens": "i", "loss": "f", "lr": "f", "grad_norm": "f"})
    assert list(disk.columns) == ["step", "tokens", "eval_loss", "loss", "lr", "grad_norm"]  # no wall clock
    pd.testing.assert_frame_equal(disk, metrics)
    assert disk["step"].tolist() == list(range(13))
    assert disk["tokens"].tolist() == [s * B * T for s in range(13)]
    assert disk.dropna(subset="eval_loss")["step"].tolist() == [0, 1, 2, 5, 10, 12]
    assert math.isnan(disk["loss"].iloc[-1])  # step 12 is the final model: evaluated, not trained
    final, info = load_checkpoint(out / "step12")
    assert info["meta"]["data_fingerprint"] == "next-token-v1" and info["meta"]["train"]["steps"] == 12
    assert all(torch.equal(a, b) for a, b in zip(final.state_dict().values(), model.state_dict().values()))


@pytest.mark.parametrize("optimizer, lr", [("adamw", 0.05), ("sgd", 0.5)])
def test_loss_decreases(tmp_path, optimizer, lr):
    _, metrics = run(
        tmp_path,
        steps=60,
        optimizer=optimizer,
        lr=lr,
        momentum=0.5 if optimizer == "sgd" else 0.0,
        schedule="cosine",
        warmup_steps=5,
        n_log_checkpoints=0,
        eval_every=0,
        resume_every=100,
    )
    first, last = metrics["loss"].iloc[:5].mean(), metrics["loss"].iloc[-6:-1].mean()
    assert last < 0.5 * first, (first, last)
    assert metrics["eval_loss"].iloc[-1] < 0.5 * metrics["eval_loss"].iloc[0]
    assert metrics["lr"].iloc[0] == pytest.approx(lr / 5) and metrics["lr"].iloc[-2] < 0.01 * lr


@pytest.mark.parametrize("clip", [None, 1e-3])
def test_grad_clipping(tmp_path, clip):
    # One plain SGD step with lr 1: the parameter update is exactly the (clipped) gradient.
    model, metrics = run(tmp_path, steps=1, optimizer="sgd", lr=1.0, grad_clip=clip, model_kw={"dropout": 0.0})
    start = tiny(seed=0)
    moved = torch.cat([(a - b).flatten() for a, b in zip(model.parameters(), start.parameters())]).norm().item()
    grad_norm = metrics["grad_norm"].iloc[0]
    assert grad_norm > 0.01
    assert moved == pytest.approx(grad_norm if clip is None else clip, rel=1e-3)


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_weight_decay_shrinks_matrices_and_embeddings_but_not_biases_or_norm_gains(tmp_path, optimizer):
    # One update (no clipping, no dropout): decay wd leaves a decayed weight lr * wd * its initial value
    # below where the same update without decay leaves it (AdamW's decoupled shrink, SGD's wd * w added
    # to the gradient), and every bias and LayerNorm parameter exactly where it is without decay.
    lr, wd = 0.1, 0.5
    start = dict(tiny(seed=0).named_parameters())
    kw = dict(steps=1, optimizer=optimizer, lr=lr, grad_clip=None, model_kw={"dropout": 0.0})
    plain = dict(run(tmp_path, "plain", **kw)[0].named_parameters())
    decayed = dict(run(tmp_path, "decayed", weight_decay=wd, **kw)[0].named_parameters())
    assert set(start) == {"emb.weight", "head.weight", "head.bias", "ln.weight", "ln.bias"}
    for name in ("emb.weight", "head.weight"):
        torch.testing.assert_close(plain[name] - decayed[name], lr * wd * start[name])
    for name in ("head.bias", "ln.weight", "ln.bias"):
        assert not torch.equal(plain[name], start[name])  # it moved: the update reached it
        assert torch.equal(decayed[name], plain[name])


def test_the_loop_applies_the_schedule_over_the_runs_own_steps(tmp_path):
    # warmup over updates 0 and 1, then linear decay from the peak at step 2 to 0 at step 6 (never reached)
    _, metrics = run(tmp_path, steps=6, lr=0.1, schedule="linear", warmup_steps=2, model_kw={"dropout": 0.0})
    assert metrics["lr"].dropna().tolist() == pytest.approx([0.05, 0.1, 0.1, 0.075, 0.05, 0.025])


def test_every_update_draws_a_dropout_mask_of_its_own_from_the_runs_seed(tmp_path):
    masks = {}
    for seed in (0, 1):
        model, drawn = tiny(seed=0, dropout=0.5), masks.setdefault(seed, [])
        model.drop.register_forward_hook(lambda m, _, out, drawn=drawn: drawn.append(out != 0) if m.training else None)
        train(model, batches, config(steps=4, seed=seed), tmp_path / f"{seed}", tmp_path / f"{seed}.s", progress=False)
    assert len(masks[0]) == len(masks[1]) == 4
    assert not any(torch.equal(a, b) for a, b in itertools.combinations(masks[0], 2))  # no mask repeats
    # another seed, other masks: none of them, at any step (seed 1 is no copy of seed 0 shifted by a step)
    assert not any(torch.equal(a, b) for a in masks[0] for b in masks[1])


def test_resume_after_exception_is_bit_exact(tmp_path):
    run(tmp_path, "ref")
    with pytest.raises(Interrupt):
        run(tmp_path, "resumed", fail_at=8)
    assert not (tmp_path / "resumed").exists()  # nothing published by an interrupted run
    seen = []
    run(tmp_path, "resumed", seen=seen)
    assert seen[0] == 6  # continued from the last resume state, not from scratch
    assert_same_run(tmp_path / "ref", tmp_path / "resumed")


def test_resume_after_sigkill_is_bit_exact(tmp_path):
    run(tmp_path, "ref")
    # Same thread count as this process: float sums are bitwise only per thread count.
    code = (
        f"import torch; torch.set_num_threads({torch.get_num_threads()}); import test_train, pathlib; "
        f"test_train.run(pathlib.Path({str(tmp_path)!r}), 'killed', kill_at=10)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    assert not (tmp_path / "killed").exists()
    seen = []
    run(tmp_path, "killed", seen=seen)
    assert seen[0] == 9
    assert_same_run(tmp_path / "ref", tmp_path / "killed")


def test_evaluation_does_not_perturb_training(tmp_path):
    # Dropout is re-seeded per step, so an eval_fn that draws random numbers changes nothing.
    def noisy_probe(model, step):
        return {"noise": torch.rand(5).sum().item()}

    results = []
    for name, eval_fn in (("quiet", None), ("noisy", noisy_probe)):
        model = tiny(seed=0, dropout=0.5)
        metrics = train(
            model, batches, config(), tmp_path / name, tmp_path / "scratch", eval_fn=eval_fn, progress=False
        )
        results.append((model, metrics[["loss", "grad_norm"]].dropna()))
    (quiet, quiet_metrics), (noisy, noisy_metrics) = results
    pd.testing.assert_frame_equal(quiet_metrics, noisy_metrics)
    assert all(torch.equal(a, b) for a, b in zip(quiet.parameters(), noisy.parameters()))


def test_changed_config_starts_fresh(tmp_path, capfd):
    with pytest.raises(Interrupt):
        run(tmp_path, "run", fail_at=8, checkpoint_every=1)  # leaves step3, step4, ... in scratch
    seen = []
    run(tmp_path, "run", seen=seen, lr=0.02)
    assert seen[0] == 0
    resume = tmp_path / "run.scratch" / "resume"
    (said,) = [line for line in capfd.readouterr().err.splitlines() if str(resume) in line]
    assert_names(said, "fingerprint")  # why the resume state is not taken
    run(tmp_path, "ref", lr=0.02)
    assert_same_run(tmp_path / "ref", tmp_path / "run")  # also: no stale checkpoints published


def test_out_dir_replaced_only_when_complete(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "old.txt").write_text("previous result")
    with pytest.raises(Interrupt):
        run(tmp_path, "run", fail_at=4)
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    run(tmp_path, "run")
    assert not (out / "old.txt").exists() and (out / "metrics.parquet").exists()


def test_epoch_batches_visit_every_window_once_per_epoch():
    from emergence.core.train.batches import epoch_batches

    windows = np.arange(10 * 4).reshape(10, 4)  # 10 windows of T + 1 = 4 tokens
    batch_fn = epoch_batches(windows, 3, seed=0)  # 3 batches per epoch, one window sits out
    for epoch in range(2):
        seen = np.concatenate([batch_fn(epoch * 3 + i)[0][:, 0].numpy() // 4 for i in range(3)])
        assert len(set(seen)) == 9
    x, y = batch_fn(0)
    assert torch.equal(x[:, 1:], y[:, :-1])  # next-token targets
    assert torch.equal(batch_fn(4)[0], epoch_batches(windows, 3, seed=0)(4)[0])  # pure function of step
    assert not torch.equal(batch_fn(0)[0], epoch_batches(windows, 3, seed=1)(0)[0])
    full = epoch_batches(windows, 10, seed=0)
    assert torch.equal(full(0)[0], full(7)[0])


def test_epoch_batches_of_a_size_that_divides_the_windows_visit_all_in_full_batches():
    from emergence.core.train.batches import epoch_batches

    windows = np.arange(12 * 4).reshape(12, 4)  # 12 windows, 4 batches of 3 an epoch: none sits out
    batch_fn = epoch_batches(windows, 3, seed=0)
    for epoch in range(2):
        batches_of_epoch = [batch_fn(epoch * 4 + i)[0][:, 0].numpy() // 4 for i in range(4)]
        assert [len(b) for b in batches_of_epoch] == [3, 3, 3, 3]
        assert sorted(np.concatenate(batches_of_epoch).tolist()) == list(range(12))


# ---- a nan or inf loss --------------------------------------------------------


def test_nonfinite_loss_stops_and_keeps_the_resume_state_before_it(tmp_path):
    # resume states fall due at steps 1, 2, 3, 5 (checkpoints, every 3): the one of step 6, captured
    # before its nan update, must not replace that of step 5
    with pytest.raises(PipelineError) as stop:
        run(tmp_path, "stopped", nan_at=6)
    resume = tmp_path / "stopped.scratch" / "resume"
    assert str(stop.value).startswith("train: ")
    assert_names(
        str(stop.value), "nan", "step 6", "lr 0.05", "step 5", resume, "train.lr", "train.on_nonfinite: continue"
    )
    assert json.loads((tmp_path / "stopped.scratch" / "resume" / "state.json").read_text())["step"] == 5
    assert not (tmp_path / "stopped").exists()
    # the same run under `continue` resumes from it and ends with the bits of a run never stopped
    run(tmp_path, "straight", nan_at=6, on_nonfinite="continue")
    seen = []
    run(tmp_path, "stopped", nan_at=6, on_nonfinite="continue", seen=seen)
    assert seen[0] == 5
    assert_same_run(tmp_path / "straight", tmp_path / "stopped")


def test_nonfinite_loss_at_the_first_step_keeps_no_resume_state(tmp_path):
    with refuses("train: ", "nan", "step 0", "no resume state") as stop:
        run(tmp_path, nan_at=0)
    assert str(stop.value).startswith("train: ")
    assert not (tmp_path / "run.scratch" / "resume").exists()


def test_continue_records_the_first_diverged_step(tmp_path, capfd):
    _, metrics = run(tmp_path, nan_at=6, on_nonfinite="continue")
    losses = metrics.set_index("step")["loss"]
    assert [step for step in range(12) if not np.isfinite(losses[step])] == [6]
    (said,) = [line for line in capfd.readouterr().err.splitlines() if line.startswith("warning: train: ")]
    assert_names(said, "nan", "step 6", "on_nonfinite: continue", "diverged_at")  # said once, at the first
    meta = {step: load_checkpoint(path)[1]["meta"] for step, path in list_checkpoints(tmp_path / "run")}
    assert {step: m.get("diverged_at") for step, m in meta.items()} == {0: None, 1: None, 2: None, 5: None, 12: 6}
    assert all("on_nonfinite" not in m["train"] for m in meta.values())


def test_the_policy_changes_nothing_in_a_finite_run(tmp_path):
    run(tmp_path, "stop")
    run(tmp_path, "continue", on_nonfinite="continue")
    assert_same_run(tmp_path / "stop", tmp_path / "continue")
    for _, path in list_checkpoints(tmp_path / "stop"):
        assert "diverged_at" not in load_checkpoint(path)[1]["meta"]


# ---- seeds --------------------------------------------------------------------


def test_seeds_up_to_numpys_limit_train_and_beyond_it_are_refused(tmp_path):
    top = 2**32 - 1  # np.random.seed's limit; torch.manual_seed takes up to 2**64 - 1
    run(tmp_path, "top", seed=top, steps=2, n_log_checkpoints=0, eval_every=0)
    with pytest.raises(PipelineError) as refused:
        run(tmp_path, "over", seed=top + 1, steps=2)
    assert_refused(str(refused.value).splitlines(), "train.seed", top + 1)
    assert str(top) in str(refused.value)  # the limit
    assert not (tmp_path / "over.scratch").exists()


# ---- a full disk ----------------------------------------------------------------

# What safetensors raises when the disk fills up mid-write.
DISK_FULL = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'


def test_a_full_disk_while_saving_resume_state_keeps_the_last_good_one(tmp_path, monkeypatch):
    import safetensors.torch
    from safetensors import SafetensorError

    real, calls = safetensors.torch.save_file, []

    def fill_disk(tensors, filename, *args, **kwargs):
        if filename.endswith("state.safetensors"):
            calls.append(filename)
            if len(calls) == 4:  # the resume state of step 5 (after those of steps 1, 2, 3)
                open(filename, "wb").write(b"half a state")
                raise SafetensorError(DISK_FULL)
        return real(tensors, filename, *args, **kwargs)

    run(tmp_path, "ref")
    monkeypatch.setattr(safetensors.torch, "save_file", fill_disk)
    with pytest.raises(PipelineError) as full:
        run(tmp_path, "full")
    message, resume = str(full.value), tmp_path / "full.scratch" / "resume"
    assert message.startswith(f"{resume}: ")
    assert_names(message, "no space left on device", "previous resume state")
    assert re.search(r"[\d,]+ bytes, [\d,]+ free", message), message  # what it needs, what the disk has
    assert json.loads((resume / "state.json").read_text())["step"] == 3
    assert sorted(p.name for p in resume.parent.iterdir() if p.name.startswith(".")) == []  # no temporaries
    monkeypatch.setattr(safetensors.torch, "save_file", real)  # space freed: the rerun resumes from step 3
    seen = []
    run(tmp_path, "full", seen=seen)
    assert seen[0] == 3
    assert_same_run(tmp_path / "ref", tmp_path / "full")
