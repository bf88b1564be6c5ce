"""Accuracy, hop-wise accuracy and heuristic agreement over training; phase labels.

Phases (Wu, Geiger & Millière): 1 random -> 2 heuristic -> 3 chain traversal;
the paper (summary we have): "Three distinct phases observed at specific
training steps (0-800, 1200-14000, 34000-105400) with accuracy progression from
12% to 56% to 99.9%", phase 2 being "shallow heuristics favoring early
assignments".

A heuristic is *followed* when the model gives its guess where that guess is
wrong (`follow_<name>`: agreement on the programs where the heuristic says a
digit other than the answer). Plain agreement (`agree_<name>`) cannot tell:
under the paper distribution the first constant is the answer on a third of
the programs, so a perfect model agrees with it that often. Phase 2 starts
when some heuristic is followed at least `heuristic_margin` above chance;
phase 3 when the deepest hop class reaches `traversal_accuracy` and beats
every heuristic's following rate.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from emergence.core.io import PipelineError, read_parquet
from emergence.core.train.checkpoint import diverged_at, list_checkpoints, load_checkpoint
from emergence.studies.binding.batches import EncodedPrograms, encode_programs, predict_answers
from emergence.studies.binding.heuristics import HEURISTICS
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.trajectory_params import CHANCE, PhaseParams

PHASES = ("random", "heuristic", "traversal")


def _row(seed: int, step: int, metric: str, hops: int, value: float, n: int) -> dict:
    return dict(seed=seed, step=step, layer=-1, head=-1, metric=metric, hops=hops, value=float(value), n=int(n))


def checkpoint_rows(preds: np.ndarray, programs: pd.DataFrame, seed: int, step: int) -> list[dict]:
    """Tidy rows for one checkpoint: accuracy (all, per hop class) and heuristic agreement."""
    answers, hops = programs["answer"].to_numpy(), programs["hops"].to_numpy()
    correct = preds == answers
    rows = [_row(seed, step, "accuracy", -1, correct.mean(), len(correct))]
    for h in np.unique(hops):
        mask = hops == h
        rows.append(_row(seed, step, "accuracy", int(h), correct[mask].mean(), mask.sum()))
    for name in HEURISTICS:
        guess = programs[f"heur_{name}"].to_numpy()
        agree = preds == guess
        rows.append(_row(seed, step, f"agree_{name}", -1, agree.mean(), len(agree)))
        wrong = (guess >= 0) & (guess != answers)
        if wrong.any():
            rows.append(_row(seed, step, f"follow_{name}", -1, agree[wrong].mean(), wrong.sum()))
    return rows


def trajectory_table(
    checkpoints: Iterable[tuple[int, torch.nn.Module]],
    data: EncodedPrograms,
    programs: pd.DataFrame,
    tok: CharTokenizer,
    seed: int,
) -> pd.DataFrame:
    """One block of rows per checkpoint; `programs` are the rows `data` encodes."""
    rows = []
    for step, model in checkpoints:
        rows += checkpoint_rows(predict_answers(model, data, tok), programs, seed, step)
    return pd.DataFrame(rows)


def run_trajectory(run_dir: Path, programs: pd.DataFrame, tok: CharTokenizer, seed: int) -> pd.DataFrame:
    """Every checkpoint of a run scored on `programs`, plus the training loop's logged rows."""
    ckpts = list_checkpoints(run_dir)
    if not ckpts:
        raise PipelineError(f"{run_dir}: no step{{N}} checkpoints in the run directory")
    data = encode_programs(programs["program"], programs["answer"], tok)
    models = ((step, load_checkpoint(path)[0]) for step, path in tqdm(ckpts, desc="checkpoints"))
    traj = trajectory_table(models, data, programs, tok, seed)
    metrics = read_parquet(run_dir / "metrics.parquet", {"step": "i", "loss": "f"})
    return pd.concat(
        [traj, training_rows(metrics, seed, diverged_at(load_checkpoint(ckpts[-1][1])[1]))], ignore_index=True
    )


def training_rows(metrics: pd.DataFrame, seed: int, diverged_at: int | None = None) -> pd.DataFrame:
    """The training loop's logged loss (and validation accuracy) as tidy rows; a `diverged_at` row
    (value: the step) when the run's loss went nan or inf and training went on."""
    rows = []
    for col, name in (("loss", "train_loss"), ("val_accuracy", "val_accuracy")):
        if col in metrics:
            logged = metrics[["step", col]].dropna()
            rows += [_row(seed, int(s), name, -1, v, 0) for s, v in logged.itertuples(index=False)]
    if diverged_at is not None:
        rows.append(_row(seed, diverged_at, "diverged_at", -1, diverged_at, 0))
    return pd.DataFrame(rows)


def detect_phases(traj: pd.DataFrame, p: PhaseParams) -> pd.DataFrame:
    """Step ranges of the three phases for one seed (start_step -1 = never reached)."""
    seed = int(traj["seed"].iloc[0])
    wide = traj[traj["hops"].eq(-1) | traj["metric"].eq("accuracy")]
    follow = wide[wide["metric"].str.startswith("follow_")]
    if not (wide["metric"] == "accuracy").any():
        raise PipelineError(f"binding trajectory of seed {seed}: no accuracy rows to find the phases in")
    acc = wide[wide["metric"] == "accuracy"].pivot_table(index="step", columns="hops", values="value")
    if follow.empty:  # no program on which a heuristic is wrong: no heuristic can be told apart, none followed
        follow = pd.DataFrame({"step": acc.index, "metric": "follow_none", "value": 0.0})
    following = follow.pivot_table(index="step", columns="metric", values="value").reindex(acc.index, fill_value=0.0)
    steps = acc.index.to_numpy()
    deep = acc[acc.columns.max()].to_numpy()
    best_follow, best_name = following.max(axis=1).to_numpy(), following.idxmax(axis=1).to_numpy()

    heur_hit = best_follow >= CHANCE + p.heuristic_margin
    trav_hit = (deep >= p.traversal_accuracy) & (deep > best_follow)
    t3 = _first(steps, trav_hit)
    t2 = _first(steps, heur_hit & (steps < t3 if t3 >= 0 else True))
    left_random = min((s for s in (t2, t3) if s >= 0), default=-1)  # -1: random to the end
    spans = [(0, left_random), (t2, t3), (t3, -1)]
    details = [
        "predictions match no heuristic and no chain above chance",
        _heuristic_detail(best_name, best_follow, steps, t2, t3),
        f"deepest hop class ({int(acc.columns.max())} hops) accuracy {deep[-1]:.3f} at the last checkpoint",
    ]
    rows = []
    for phase, (name, (start, end), detail) in enumerate(zip(PHASES, spans, details), start=1):
        if start < 0:
            end, detail = -1, "not reached"
        rows.append(dict(seed=seed, phase=phase, name=name, start_step=int(start), end_step=int(end), detail=detail))
    return pd.DataFrame(rows)


def _first(steps: np.ndarray, mask: np.ndarray) -> int:
    hits = np.flatnonzero(mask)
    return int(steps[hits[0]]) if len(hits) else -1


def _heuristic_detail(names, agree, steps, t2: int, t3: int) -> str:
    if t2 < 0:
        return "not reached"
    inside = (steps >= t2) & ((steps < t3) if t3 >= 0 else True)
    peak = int(np.argmax(np.where(inside, agree, -1)))
    name = names[peak].removeprefix("follow_")
    return f"{name} followed at {agree[peak]:.3f} where it is wrong (peak, step {steps[peak]})"
