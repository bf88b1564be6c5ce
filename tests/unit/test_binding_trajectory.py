"""Per-checkpoint rows and phase detection (Wu, Geiger & Millière: random -> heuristic -> chain traversal)
on hand-made trajectories.

Per-checkpoint rows are checked by hand and against plain loops over the programs, with many guesses of 0.
Phase boundaries sit at known steps of uneven step grids, with the thresholds hit exactly and missed just
beside, and first checkpoints that are not step 0; the whole phases table is compared, row by row. Then the
training loop's rows and the phase params' bounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from refusals import assert_refused, refuses, refuses_key

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.studies.binding.heuristics import HEURISTICS
from emergence.studies.binding.trajectory import checkpoint_rows, detect_phases, training_rows
from emergence.studies.binding.trajectory_params import PhaseParams

HEUR = list(HEURISTICS)


# ---- per-checkpoint rows


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


def reference_rows(preds, programs) -> dict[tuple[str, int], tuple[float, int]]:
    """(metric, hops) -> (value, n) by plain loops over the programs."""
    out = {}
    ans, hops = list(programs["answer"]), list(programs["hops"])
    right = [p == a for p, a in zip(preds, ans)]
    out[("accuracy", -1)] = (sum(right) / len(right), len(right))
    for h in sorted(set(hops)):
        idx = [i for i, x in enumerate(hops) if x == h]
        out[("accuracy", h)] = (sum(right[i] for i in idx) / len(idx), len(idx))
    for name in HEUR:
        g = list(programs[f"heur_{name}"])
        agree = [p == x for p, x in zip(preds, g)]
        out[(f"agree_{name}", -1)] = (sum(agree) / len(agree), len(agree))
        wrong = [i for i in range(len(g)) if g[i] != -1 and g[i] != ans[i]]
        if wrong:
            out[(f"follow_{name}", -1)] = (sum(agree[i] for i in wrong) / len(wrong), len(wrong))
    return out


def test_checkpoint_rows_match_loops_with_zero_guesses():
    rng = np.random.default_rng(5)
    n = 60
    programs = pd.DataFrame({"answer": rng.integers(0, 3, n), "hops": rng.choice([0, 1, 4], n)})
    for name in HEUR:  # small digit range: many 0 guesses, many right, many -1
        programs[f"heur_{name}"] = rng.integers(-1, 3, n)
    preds = rng.integers(0, 3, n)
    rows = pd.DataFrame(checkpoint_rows(preds, programs, seed=3, step=7))
    got = {(m, h): (v, k) for m, h, v, k in rows[["metric", "hops", "value", "n"]].itertuples(index=False)}
    want = reference_rows(preds, programs)
    assert got.keys() == want.keys()
    for key, (v, k) in want.items():
        assert got[key][0] == pytest.approx(v) and got[key][1] == k, key


def test_follow_counts_a_wrong_guess_of_zero():
    # The heuristic guesses 0 on every program; the answer is 0 on the first only. So it is
    # wrong on 3 programs, and the model gives 0 on two of them.
    programs = pd.DataFrame({"answer": [0, 1, 2, 3], "hops": [1, 1, 1, 1]})
    for name in HEUR:
        programs[f"heur_{name}"] = [0, 0, 0, 0] if name == HEUR[0] else [-1, -1, -1, -1]
    rows = pd.DataFrame(checkpoint_rows(np.array([0, 0, 0, 3]), programs, seed=0, step=0))
    follow = rows[rows["metric"] == f"follow_{HEUR[0]}"].iloc[0]
    assert (follow["value"], follow["n"]) == (pytest.approx(2 / 3), 3)
    assert not rows["metric"].eq(f"follow_{HEUR[1]}").any()  # -1 everywhere: never wrong


# ---- phases: the deepest class against following, agreement alone makes none


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


# ---- phases: thresholds hit exactly and missed just below


def two_class_trajectory(steps, deep, follow, shallow=None) -> pd.DataFrame:
    """Deepest class 3 at `deep`; class 1 at `shallow` (default 1 - deep); HEUR[1] followed at `follow`."""
    shallow = shallow or [1 - d for d in deep]
    rows = []
    for s, d, f, sh in zip(steps, deep, follow, shallow):
        base = dict(seed=4, step=s, layer=-1, head=-1, n=10)
        rows += [dict(base, metric="accuracy", hops=h, value=v) for h, v in ((-1, 0.5), (1, sh), (3, d))]
        rows += [dict(base, metric=f"follow_{n}", hops=-1, value=f if n == HEUR[1] else 0.1) for n in HEUR]
    return pd.DataFrame(rows)


def spans(traj, **kw) -> dict[str, list[int]]:
    ph = detect_phases(traj, PhaseParams(**kw)).set_index("name")
    return {n: ph.loc[n, ["start_step", "end_step"]].tolist() for n in ph.index}


def test_phase_thresholds_are_inclusive():
    # Step 200: following exactly chance + margin (0.25) starts phase 2; step 300: deep accuracy
    # exactly traversal_accuracy (0.8), above following, starts phase 3. First checkpoint 100.
    traj = two_class_trajectory([100, 200, 300], deep=[0.1, 0.1, 0.8], follow=[0.24, 0.25, 0.1])
    assert spans(traj) == {"random": [0, 200], "heuristic": [200, 300], "traversal": [300, -1]}


def test_phase_thresholds_just_below_are_not_reached():
    traj = two_class_trajectory([100, 200, 300], deep=[0.1, 0.1, 0.79], follow=[0.1, 0.249, 0.1])
    assert spans(traj) == {"random": [0, -1], "heuristic": [-1, -1], "traversal": [-1, -1]}


def test_traversal_needs_deep_strictly_above_following():
    # Step 20: deep 0.9 equals the best following rate: not traversal (and following 0.9 makes it
    # heuristic); step 30 deep 0.9 > 0.5.
    traj = two_class_trajectory([10, 20, 30], deep=[0.1, 0.9, 0.9], follow=[0.1, 0.9, 0.5])
    assert spans(traj) == {"random": [0, 20], "heuristic": [20, 30], "traversal": [30, -1]}


def test_heuristic_following_after_traversal_starts_no_phase_two():
    # Following reaches 0.3 only at and after the traversal step: phase 2 never starts, phase 1
    # ends where phase 3 starts. The deepest class is read (class 1 is high early, not deep).
    traj = two_class_trajectory([0, 5, 9], deep=[0.1, 0.85, 0.95], follow=[0.1, 0.3, 0.6], shallow=[0.9, 0.9, 0.9])
    assert spans(traj) == {"random": [0, 5], "heuristic": [-1, -1], "traversal": [5, -1]}


def test_heuristic_detail_quotes_the_peak_inside_phase_two():
    # Peak following 0.7 at step 3 lies inside phase 2 (steps 2..4, 4 excluded); 0.85 at step 4
    # (deep 0.9 beats it: traversal starts) and 0.95 at step 6 must not be quoted.
    traj = two_class_trajectory([1, 2, 3, 4, 6], deep=[0.1, 0.1, 0.2, 0.9, 0.99], follow=[0.1, 0.4, 0.7, 0.85, 0.95])
    ph = detect_phases(traj, PhaseParams()).set_index("name")
    assert ph.loc["heuristic", ["start_step", "end_step"]].tolist() == [2, 4]
    assert ph.loc["heuristic", "detail"] == f"{HEUR[1]} followed at 0.700 where it is wrong (peak, step 3)"
    assert ph.loc["traversal", "detail"] == "deepest hop class (3 hops) accuracy 0.990 at the last checkpoint"


# ---- phases: the whole table at known steps of an uneven grid

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


# ---- the training loop's rows


def test_training_rows_keep_logged_loss():
    metrics = pd.DataFrame({"step": [0, 1, 2], "loss": [2.0, 1.5, np.nan], "val_accuracy": [np.nan, np.nan, 0.4]})
    rows = training_rows(metrics, seed=1).set_index(["metric", "step"])["value"]
    assert rows[("train_loss", 1)] == 1.5 and rows[("val_accuracy", 2)] == 0.4
    assert ("train_loss", 2) not in rows


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


# ---- phase params


@pytest.mark.parametrize(
    "values",
    [
        {"n_programs": 0},
        {"heuristic_margin": 0.0},
        {"heuristic_margin": 0.9},
        {"heuristic_margin": 0.95},
        {"heuristic_margin": 1.5},
        {"traversal_accuracy": 0.1},
        {"traversal_accuracy": 1.01},
        {"traversal_accuracy": 1.05},
    ],
    ids=str,
)
def test_phase_params_refused_at_and_past_their_bounds_name_the_key(values):
    ((key, value),) = values.items()
    with refuses_key(f"binding_trajectory.{key}", value):
        from_dict(PhaseParams, values, "binding_trajectory")


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
        {"heuristic_margin": 1e-6, "traversal_accuracy": 0.100001},
    ],
    ids=str,
)
def test_phase_params_accepted_at_their_bounds(values):
    assert from_dict(PhaseParams, values, "binding_trajectory") == PhaseParams(**values)


def test_a_bool_is_no_count_of_programs():
    with pytest.raises(PipelineError) as e:
        from_dict(PhaseParams, {"n_programs": True}, "binding_trajectory")
    assert_refused([str(e.value)], "binding_trajectory.n_programs", True, rule="integer")
