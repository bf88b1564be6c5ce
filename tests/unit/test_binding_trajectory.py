"""Per-checkpoint rows and phase detection on hand-made trajectories."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from refusals import assert_refused

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.studies.binding.heuristics import HEURISTICS
from emergence.studies.binding.trajectory import PhaseParams, checkpoint_rows, detect_phases, training_rows

HEUR = list(HEURISTICS)


def programs_frame() -> pd.DataFrame:
    df = pd.DataFrame({"answer": [1, 2, 3, 4], "hops": [0, 0, 2, 2]})
    for i, name in enumerate(HEUR):
        df[f"heur_{name}"] = [[1, 5, 5, 4], [-1, -1, 9, 4]][i] if i < 2 else [9, 9, 9, 9]
    return df


def test_checkpoint_rows_count_accuracy_by_hops_and_agreement():
    rows = pd.DataFrame(checkpoint_rows(np.array([1, 0, 3, 4]), programs_frame(), seed=2, step=10))
    value = rows.set_index(["metric", "hops"])["value"]
    assert value[("accuracy", -1)] == 0.75
    assert value[("accuracy", 0)] == 0.5 and value[("accuracy", 2)] == 1.0
    assert value[(f"agree_{HEUR[0]}", -1)] == 0.5
    assert value[(f"agree_{HEUR[1]}", -1)] == 0.25  # its 4 at the last program
    # following: agreement where the heuristic's digit is wrong (rows 1, 2 for HEUR[0]; row 2 for HEUR[1])
    assert value[(f"follow_{HEUR[0]}", -1)] == 0.0 and value[(f"follow_{HEUR[1]}", -1)] == 0.0
    rows = pd.DataFrame(checkpoint_rows(np.array([1, 5, 5, 4]), programs_frame(), seed=2, step=10))
    value, n = rows.set_index(["metric", "hops"])["value"], rows.set_index("metric")["n"]
    assert value[(f"agree_{HEUR[0]}", -1)] == 1.0 and value[(f"follow_{HEUR[0]}", -1)] == 1.0
    assert n[f"follow_{HEUR[0]}"] == 2 and n[f"follow_{HEUR[1]}"] == 1 and n[f"follow_{HEUR[2]}"] == 4
    assert set(rows["seed"]) == {2} and set(rows["layer"]) == {-1} and set(rows["head"]) == {-1}


def test_checkpoint_rows_accuracy_per_hop_class_by_hand():
    # Three classes, interleaved, of sizes 2 / 3 / 5 and accuracies 1 / 0 / 3/5 (all 5/10):
    # pooling, swapping classes or counting the wrong programs each changes a number below.
    # Hop 2 is absent, so a class index used as a hop count shows too.
    hops = [3, 0, 1, 3, 3, 1, 0, 3, 1, 3]
    right = [1, 1, 0, 0, 1, 0, 1, 0, 0, 1]  # hop 0: both; hop 1: none; hop 3: 3 of 5
    df = pd.DataFrame({"answer": [5] * 10, "hops": hops})
    for name in HEUR:
        df[f"heur_{name}"] = -1  # no guesses: no follow rows
    preds = np.where(np.array(right) == 1, 5, 6)
    rows = pd.DataFrame(checkpoint_rows(preds, df, seed=0, step=0))
    acc = rows[rows["metric"] == "accuracy"].set_index("hops")
    assert acc["value"].to_dict() == {-1: 0.5, 0: 1.0, 1: 0.0, 3: 0.6}
    assert acc["n"].to_dict() == {-1: 10, 0: 2, 1: 3, 3: 5}


def synthetic(steps, deep_acc, follow) -> pd.DataFrame:
    """HEUR[2] is followed at `follow`; HEUR[0] agrees with 0.9 of answers at every step only
    because it is right that often (followed at chance): agreement alone must not make a phase."""
    rows = []
    for s, acc, fo in zip(steps, deep_acc, follow):
        # all programs at half the deepest class's accuracy: phases must read the deepest class
        rows += [
            dict(seed=0, step=s, layer=-1, head=-1, metric="accuracy", hops=h, value=v, n=10)
            for h, v in ((-1, acc / 2), (4, acc))
        ]
        for name in HEUR:
            values = {"follow": fo if name == HEUR[2] else 0.1, "agree": 0.9 if name == HEUR[0] else 0.1}
            rows += [
                dict(seed=0, step=s, layer=-1, head=-1, metric=f"{kind}_{name}", hops=-1, value=v, n=10)
                for kind, v in values.items()
            ]
    return pd.DataFrame(rows)


def test_three_phases_in_order():
    traj = synthetic([0, 10, 20, 40, 80], deep_acc=[0.1, 0.1, 0.15, 0.85, 0.99], follow=[0.1, 0.4, 0.5, 0.2, 0.1])
    phases = detect_phases(traj, PhaseParams()).set_index("name")
    assert phases.loc["random", ["start_step", "end_step"]].tolist() == [0, 10]
    assert phases.loc["heuristic", ["start_step", "end_step"]].tolist() == [10, 40]
    assert phases.loc["traversal", ["start_step", "end_step"]].tolist() == [40, -1]
    assert HEUR[2] in phases.loc["heuristic", "detail"]


def test_traversal_needs_deep_accuracy_above_every_heuristics_following():
    # Step 20: the deepest class is at 0.85 >= traversal_accuracy (0.8), but HEUR[2] is still
    # followed at 0.9 where it is wrong, so that step is heuristic, not traversal. Step 30:
    # deep 0.95 beats following 0.2: traversal starts there.
    traj = synthetic([0, 10, 20, 30], deep_acc=[0.1, 0.3, 0.85, 0.95], follow=[0.1, 0.6, 0.9, 0.2])
    phases = detect_phases(traj, PhaseParams()).set_index("name")
    assert phases.loc["random", ["start_step", "end_step"]].tolist() == [0, 10]
    assert phases.loc["heuristic", ["start_step", "end_step"]].tolist() == [10, 30]
    assert phases.loc["traversal", ["start_step", "end_step"]].tolist() == [30, -1]
    assert "followed at 0.900" in phases.loc["heuristic", "detail"]  # its peak lies inside phase 2


def test_phase_not_reached_is_marked():
    traj = synthetic([0, 10, 20], deep_acc=[0.1, 0.12, 0.1], follow=[0.1, 0.1, 0.12])
    phases = detect_phases(traj, PhaseParams()).set_index("name")
    assert phases.loc["random", ["start_step", "end_step"]].tolist() == [0, -1]
    assert phases.loc["heuristic", "start_step"] == -1 and phases.loc["traversal", "start_step"] == -1
    assert phases.loc["traversal", "detail"] == "not reached"


def test_training_rows_keep_logged_loss():
    metrics = pd.DataFrame({"step": [0, 1, 2], "loss": [2.0, 1.5, np.nan], "val_accuracy": [np.nan, np.nan, 0.4]})
    rows = training_rows(metrics, seed=1).set_index(["metric", "step"])["value"]
    assert rows[("train_loss", 1)] == 1.5 and rows[("val_accuracy", 2)] == 0.4
    assert ("train_loss", 2) not in rows


@pytest.mark.parametrize(
    "values",
    [
        {"n_programs": 1},
        # chance is 0.1 (ten digits): a margin must leave room above it, (0, 0.9) open
        {"heuristic_margin": 0.01},
        {"heuristic_margin": 0.89},
        # traversal must beat chance, (0.1, 1]: perfect accuracy is a reachable bar
        {"traversal_accuracy": 0.11},
        {"traversal_accuracy": 1.0},
    ],
)
def test_phase_params_edges_that_pass(values):
    assert from_dict(PhaseParams, values, "binding_trajectory") == PhaseParams(**values)


@pytest.mark.parametrize(
    "values",
    [
        {"n_programs": 0},
        {"heuristic_margin": 0.0},
        {"heuristic_margin": 0.9},
        {"heuristic_margin": 0.95},
        {"traversal_accuracy": 0.1},
        {"traversal_accuracy": 1.05},
    ],
    ids=str,
)
def test_phase_params_errors_name_the_key(values):
    with pytest.raises(PipelineError) as e:
        from_dict(PhaseParams, values, "binding_trajectory")
    ((key, value),) = values.items()
    assert_refused(str(e.value).splitlines(), f"binding_trajectory.{key}", value)


def test_a_bool_is_no_count_of_programs():
    with pytest.raises(PipelineError) as e:
        from_dict(PhaseParams, {"n_programs": True}, "binding_trajectory")
    assert_refused([str(e.value)], "binding_trajectory.n_programs", True, rule="integer")
