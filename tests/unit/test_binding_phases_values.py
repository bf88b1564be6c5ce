"""Phase detection (Wu, Geiger & Millière: random -> heuristic -> chain traversal) on hand-built
trajectories whose phase boundaries sit at known steps of an uneven step grid, with the thresholds
hit exactly and missed just beside; the whole phases table is compared, row by row."""

from __future__ import annotations

import pandas as pd
import pytest
from refusals import assert_refused, refuses

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.studies.binding.heuristics import HEURISTICS
from emergence.studies.binding.trajectory import PhaseParams, detect_phases, training_rows

HEUR = list(HEURISTICS)
RANDOM = "predictions match no heuristic and no chain above chance"


def trajectory(steps, deep, follow, seed=7, deepest=3, other=None) -> pd.DataFrame:
    """Rows as the trajectory stage writes them. `follow`: per step, HEUR[2]'s following rate, or None
    for a checkpoint where no heuristic is ever wrong (no follow rows at all). `other`: HEUR[4]'s
    following rate per step (chance when not given). HEUR[0] agrees with 0.9 of the answers
    throughout, only because it is right that often: agreement must not count. The pooled and the
    shallower hop classes sit elsewhere, so only the deepest class can make a phase."""
    rows = []
    other = other or [0.1] * len(steps)

    def row(step, metric, hops, value):
        rows.append(dict(seed=seed, step=step, layer=-1, head=-1, metric=metric, hops=hops, value=value, n=10))

    for s, acc, fo, ot in zip(steps, deep, follow, other):
        for hops, value in ((-1, acc / 2), (0, 1.0 - acc), (1, 0.99), (deepest, acc)):
            row(s, "accuracy", hops, value)
        for name in HEUR:
            row(s, f"agree_{name}", -1, 0.9 if name == HEUR[0] else 0.1)
            if fo is not None:
                row(s, f"follow_{name}", -1, fo if name == HEUR[2] else ot if name == HEUR[4] else 0.1)
    # the stage appends the training loop's rows (other steps, hops -1) before detecting phases
    logged = {"step": [0, 3, 333, 700], "loss": [2.3, 2.0, 0.9, 0.1], "val_accuracy": [0.1, 0.2, 0.95, 0.99]}
    metrics = pd.DataFrame(logged)
    return pd.concat([pd.DataFrame(rows), training_rows(metrics, seed)], ignore_index=True)


def table(*phases) -> list[dict]:
    return [
        dict(seed=7, phase=i, name=name, start_step=start, end_step=end, detail=detail)
        for i, (name, start, end, detail) in enumerate(phases, start=1)
    ]


def test_three_phases_at_known_steps_with_thresholds_hit_exactly():
    # step:      0    5     15    40   100   160   250   600
    # deep:     .1   .1    .2    .3   .79   .85   .80   .95   (traversal_accuracy 0.8)
    # followed: .1  .24   .25   .6   .3    .85   --    .1    (chance 0.1 + margin 0.15 = 0.25)
    # Step 5 is just under the margin, 15 exactly on it: phase 2 from 15. Step 100 is just under
    # 0.8; at 160 deep accuracy only ties the following rate (not above it); at 250 deep accuracy
    # is exactly 0.8 and no heuristic is wrong on any program (no follow rows: following 0), so
    # traversal starts at 250. The heuristic's peak inside [15, 250) is 0.85 at step 160.
    steps = [0, 5, 15, 40, 100, 160, 250, 600]
    traj = trajectory(
        steps,
        deep=[0.1, 0.1, 0.2, 0.3, 0.79, 0.85, 0.8, 0.95],
        follow=[0.1, 0.24, 0.25, 0.6, 0.3, 0.85, None, 0.1],
    )
    phases = detect_phases(traj, PhaseParams())
    assert phases.to_dict("records") == table(
        ("random", 0, 15, RANDOM),
        ("heuristic", 15, 250, f"{HEUR[2]} followed at 0.850 where it is wrong (peak, step 160)"),
        ("traversal", 250, -1, "deepest hop class (3 hops) accuracy 0.950 at the last checkpoint"),
    )
    assert phases["phase"].dtype.kind == "i" and phases["start_step"].dtype.kind == "i"


def test_margins_are_read_from_the_params():
    # margin 0.5: following must reach 0.6 (step 40 exactly); traversal 0.9: deep 0.95 at step 600
    traj = trajectory(
        [0, 5, 15, 40, 100, 160, 250, 600],
        deep=[0.1, 0.1, 0.2, 0.3, 0.79, 0.85, 0.8, 0.95],
        follow=[0.1, 0.24, 0.25, 0.6, 0.3, 0.85, None, 0.1],
    )
    phases = detect_phases(traj, PhaseParams(heuristic_margin=0.5, traversal_accuracy=0.9))
    assert phases.to_dict("records") == table(
        ("random", 0, 40, RANDOM),
        ("heuristic", 40, 600, f"{HEUR[2]} followed at 0.850 where it is wrong (peak, step 160)"),
        ("traversal", 600, -1, "deepest hop class (3 hops) accuracy 0.950 at the last checkpoint"),
    )


def test_a_heuristic_from_the_first_checkpoint_leaves_random_empty_and_ties_report_the_first_peak():
    # Followed at 0.5 from step 0, and again at 0.5 at step 70: the peak is the first of the tie,
    # the step phase 2 starts at. Random covers no step: (0, 0).
    traj = trajectory([0, 30, 70, 200, 450], deep=[0.1, 0.2, 0.5, 0.9, 0.97], follow=[0.5, 0.4, 0.5, 0.1, 0.05])
    assert detect_phases(traj, PhaseParams()).to_dict("records") == table(
        ("random", 0, 0, RANDOM),
        ("heuristic", 0, 200, f"{HEUR[2]} followed at 0.500 where it is wrong (peak, step 0)"),
        ("traversal", 200, -1, "deepest hop class (3 hops) accuracy 0.970 at the last checkpoint"),
    )


def test_a_heuristic_never_overtaken_runs_to_the_end():
    # No traversal: phase 2 starts at 20 (HEUR[4], 0.26) and its peak is HEUR[2] at 0.7, step 45,
    # after which following drops but deep accuracy never reaches 0.8.
    traj = trajectory(
        [0, 20, 45, 90, 180],
        deep=[0.1, 0.3, 0.5, 0.79, 0.6],
        follow=[0.1, 0.12, 0.7, 0.4, 0.3],
        other=[0.2, 0.26, 0.1, 0.1, 0.1],
    )
    assert detect_phases(traj, PhaseParams()).to_dict("records") == table(
        ("random", 0, 20, RANDOM),
        ("heuristic", 20, -1, f"{HEUR[2]} followed at 0.700 where it is wrong (peak, step 45)"),
        ("traversal", -1, -1, "not reached"),
    )


def test_the_heuristic_that_peaks_is_named():
    # HEUR[4] peaks (0.9 at step 45) while HEUR[2] is the one that crossed the margin first
    traj = trajectory(
        [0, 20, 45, 90, 180],
        deep=[0.1, 0.3, 0.5, 0.85, 0.9],
        follow=[0.1, 0.3, 0.4, 0.2, 0.1],
        other=[0.1, 0.1, 0.9, 0.3, 0.1],
    )
    assert detect_phases(traj, PhaseParams()).to_dict("records") == table(
        ("random", 0, 20, RANDOM),
        ("heuristic", 20, 90, f"{HEUR[4]} followed at 0.900 where it is wrong (peak, step 45)"),
        ("traversal", 90, -1, "deepest hop class (3 hops) accuracy 0.900 at the last checkpoint"),
    )


def test_traversal_from_the_first_checkpoint_skips_the_heuristic_phase():
    # Deep accuracy is 0.9 from step 0; a heuristic followed later (0.3 at step 10) comes after
    # traversal started, so it is no phase 2.
    traj = trajectory([0, 10, 35], deep=[0.9, 0.95, 0.99], follow=[0.1, 0.3, 0.2], deepest=4)
    assert detect_phases(traj, PhaseParams()).to_dict("records") == table(
        ("random", 0, 0, RANDOM),
        ("heuristic", -1, -1, "not reached"),
        ("traversal", 0, -1, "deepest hop class (4 hops) accuracy 0.990 at the last checkpoint"),
    )


def test_nothing_reached_keeps_random_to_the_end_and_reads_the_seed():
    traj = trajectory([0, 8, 64], deep=[0.1, 0.79, 0.5], follow=[0.1, 0.249, 0.2], seed=11)
    phases = detect_phases(traj, PhaseParams())
    assert phases.to_dict("records") == [
        dict(seed=11, phase=1, name="random", start_step=0, end_step=-1, detail=RANDOM),
        dict(seed=11, phase=2, name="heuristic", start_step=-1, end_step=-1, detail="not reached"),
        dict(seed=11, phase=3, name="traversal", start_step=-1, end_step=-1, detail="not reached"),
    ]


def test_a_trajectory_with_no_heuristic_ever_wrong_still_has_phases():
    # No checkpoint saw a program on which a heuristic is wrong: no follow_* rows at all (this raised a
    # bare pandas ValueError). No heuristic phase can be told apart; traversal still is.
    traj = trajectory([0, 10, 35], deep=[0.1, 0.5, 0.95], follow=[None, None, None])
    assert not traj["metric"].str.startswith("follow_").any()
    assert detect_phases(traj, PhaseParams()).to_dict("records") == table(
        ("random", 0, 35, RANDOM),
        ("heuristic", -1, -1, "not reached"),
        ("traversal", 35, -1, "deepest hop class (3 hops) accuracy 0.950 at the last checkpoint"),
    )


def test_a_trajectory_with_no_accuracy_rows_is_one_line():
    traj = trajectory([0, 10], deep=[0.1, 0.5], follow=[0.1, 0.1])
    with refuses("seed 7", "no accuracy rows"):
        detect_phases(traj[traj["metric"] != "accuracy"], PhaseParams())


def test_training_rows_one_row_per_logged_value_and_the_divergence():
    metrics = pd.DataFrame(
        {"step": [0, 4, 9], "loss": [2.5, float("nan"), 1.25], "val_accuracy": [float("nan"), 0.3, 0.6]}
    )
    rows = training_rows(metrics, seed=5, diverged_at=6)
    base = dict(seed=5, layer=-1, head=-1, hops=-1, n=0)
    assert rows.to_dict("records") == [
        base | dict(step=0, metric="train_loss", value=2.5),
        base | dict(step=9, metric="train_loss", value=1.25),
        base | dict(step=4, metric="val_accuracy", value=0.3),
        base | dict(step=9, metric="val_accuracy", value=0.6),
        base | dict(step=6, metric="diverged_at", value=6.0),
    ]
    assert list(rows.columns) == ["seed", "step", "layer", "head", "metric", "hops", "value", "n"]
    assert rows["value"].dtype.kind == "f" and rows["n"].dtype.kind == "i" and rows["step"].dtype.kind == "i"
    # a run logging the loss only, with no divergence
    only = training_rows(metrics[["step", "loss"]], seed=5)
    assert only[["step", "metric", "value"]].values.tolist() == [[0, "train_loss", 2.5], [9, "train_loss", 1.25]]


@pytest.mark.parametrize(
    "values",
    [
        {"n_programs": 0},
        {"heuristic_margin": 0.0},
        {"heuristic_margin": 0.9},
        {"heuristic_margin": 1.5},
        {"traversal_accuracy": 0.1},
        {"traversal_accuracy": 1.01},
    ],
    ids=str,
)
def test_phase_params_refused_at_their_bounds(values):
    with pytest.raises(PipelineError) as err:
        from_dict(PhaseParams, values, "binding_trajectory")
    ((key, value),) = values.items()
    assert_refused(str(err.value).splitlines(), f"binding_trajectory.{key}", value)


@pytest.mark.parametrize(
    "values",
    [
        {"n_programs": 1},
        {"heuristic_margin": 0.89},
        {"traversal_accuracy": 1.0},
        {"heuristic_margin": 1e-6, "traversal_accuracy": 0.100001},
    ],
    ids=str,
)
def test_phase_params_accepted_at_their_bounds(values):
    assert from_dict(PhaseParams, values, "binding_trajectory") == PhaseParams(**values)
