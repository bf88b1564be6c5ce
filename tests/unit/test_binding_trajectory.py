"""Per-checkpoint rows and phase detection on hand-made trajectories."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.studies.binding.heuristics import HEURISTICS
from emergence.studies.binding.trajectory import PhaseParams, checkpoint_rows, detect_phases, training_rows

HEUR = list(HEURISTICS)


def programs_frame() -> pd.DataFrame:
    df = pd.DataFrame({"answer": [1, 2, 3, 4], "hops": [0, 0, 2, 2]})
    for i, name in enumerate(HEUR):
        df[f"heur_{name}"] = [9, 9, 9, 9] if i else [1, 5, 5, 4]
    return df


def test_checkpoint_rows_count_accuracy_by_hops_and_agreement():
    rows = pd.DataFrame(checkpoint_rows(np.array([1, 0, 3, 4]), programs_frame(), seed=2, step=10))
    value = rows.set_index(["metric", "hops"])["value"]
    assert value[("accuracy", -1)] == 0.75
    assert value[("accuracy", 0)] == 0.5 and value[("accuracy", 2)] == 1.0
    assert value[(f"agree_{HEUR[0]}", -1)] == 0.5
    assert value[(f"agree_{HEUR[1]}", -1)] == 0.0
    assert set(rows["seed"]) == {2} and set(rows["layer"]) == {-1} and set(rows["head"]) == {-1}


def synthetic(steps, deep_acc, agree) -> pd.DataFrame:
    rows = []
    for s, acc, ag in zip(steps, deep_acc, agree):
        rows += [dict(seed=0, step=s, layer=-1, head=-1, metric="accuracy", hops=h, value=acc, n=10) for h in (-1, 4)]
        rows += [
            dict(
                seed=0, step=s, layer=-1, head=-1, metric=f"agree_{n}", hops=-1, value=ag if n == HEUR[2] else 0.1, n=10
            )
            for n in HEUR
        ]
    return pd.DataFrame(rows)


def test_three_phases_in_order():
    traj = synthetic([0, 10, 20, 40, 80], deep_acc=[0.1, 0.1, 0.15, 0.85, 0.99], agree=[0.1, 0.4, 0.5, 0.2, 0.1])
    phases = detect_phases(traj, PhaseParams()).set_index("name")
    assert phases.loc["random", ["start_step", "end_step"]].tolist() == [0, 10]
    assert phases.loc["heuristic", ["start_step", "end_step"]].tolist() == [10, 40]
    assert phases.loc["traversal", ["start_step", "end_step"]].tolist() == [40, -1]
    assert HEUR[2] in phases.loc["heuristic", "detail"]


def test_phase_not_reached_is_marked():
    traj = synthetic([0, 10, 20], deep_acc=[0.1, 0.12, 0.1], agree=[0.1, 0.1, 0.12])
    phases = detect_phases(traj, PhaseParams()).set_index("name")
    assert phases.loc["random", ["start_step", "end_step"]].tolist() == [0, -1]
    assert phases.loc["heuristic", "start_step"] == -1 and phases.loc["traversal", "start_step"] == -1
    assert phases.loc["traversal", "detail"] == "not reached"


def test_training_rows_keep_logged_loss():
    metrics = pd.DataFrame({"step": [0, 1, 2], "loss": [2.0, 1.5, np.nan], "val_accuracy": [np.nan, np.nan, 0.4]})
    rows = training_rows(metrics, seed=1).set_index(["metric", "step"])["value"]
    assert rows[("train_loss", 1)] == 1.5 and rows[("val_accuracy", 2)] == 0.4
    assert ("train_loss", 2) not in rows


def test_phase_params_validation_names_key():
    with pytest.raises(PipelineError, match="binding_trajectory.heuristic_margin"):
        from_dict(PhaseParams, {"heuristic_margin": 0.95}, "binding_trajectory")
