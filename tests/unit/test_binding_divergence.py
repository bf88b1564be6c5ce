"""A binding run whose loss went nan or inf (binding_train.on_nonfinite: continue): the trajectory
carries the step, the page and the metrics JSON say it."""

from __future__ import annotations

import pandas as pd
import test_report as r

from emergence.studies.binding.report import binding_metrics, binding_page
from emergence.studies.binding.trajectory import training_rows

METRICS = pd.DataFrame({"step": [0, 1, 2, 3], "loss": [2.0, 1.0, float("nan"), float("nan")]})


def _page(trajectory: pd.DataFrame) -> str:
    tables = (r._predictions(), r._patching(), r._ablation(), r._routing(), r._stress(), r._aids(), r._llc())
    return binding_page(r._programs(), r._heuristics(), trajectory, r._phases(), *tables, r.PROVENANCE, n_examples=1)


def test_the_diverged_step_reaches_the_trajectory_the_metrics_and_the_page():
    rows = training_rows(METRICS, seed=1, diverged_at=2)
    assert rows[rows["metric"] == "diverged_at"][["seed", "step", "value"]].values.tolist() == [[1, 2, 2.0]]
    assert rows[rows["metric"] == "train_loss"]["step"].tolist() == [0, 1]  # nan losses are not plotted
    trajectory = pd.concat([r._trajectory(), rows[rows["metric"] == "diverged_at"]], ignore_index=True)
    metrics = binding_metrics(trajectory, r._predictions(), r._heuristics(), r._phases(), r._stress())
    assert metrics["diverged_at"] == {"1": 2}
    assert metrics["final_step"] == {"0": 1000, "1": 1000}  # the marker row is no checkpoint
    assert "Seed 1: training diverged at step 2 (the loss was nan or inf" in _page(trajectory)


def test_a_finite_run_says_nothing_of_divergence():
    assert "diverged_at" not in set(training_rows(METRICS.fillna(0.5), seed=0)["metric"])
    assert (
        binding_metrics(r._trajectory(), r._predictions(), r._heuristics(), r._phases(), r._stress())["diverged_at"]
        == {}
    )
    assert "diverged" not in _page(r._trajectory())
