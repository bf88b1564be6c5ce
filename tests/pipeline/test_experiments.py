"""DVC experiments on the tiny profile: `dvc exp run -S key=value` reruns what the param feeds, and
`dvc exp show` lists each experiment with its params and the headline metrics."""

from __future__ import annotations

import json

import pytest
from artifacts import ran_stages
from conftest import copy_run, run

pytestmark = pytest.mark.pipeline


def test_an_experiment_reruns_what_its_param_feeds_and_exp_show_lists_its_metrics(tiny_run, tmp_path):
    root = copy_run(tiny_run, tmp_path / "run")
    out = run(["dvc", "exp", "run", "-n", "abl12", "-S", "binding_ablation.n_programs=12"], root).stdout
    assert sorted(ran_stages(out)) == [
        "binding_ablation@0",
        "binding_ablation@1",
        "binding_report",
        "index_report",
        "params_check",  # first: the whole file checked; its stamp's bytes do not change
    ]
    shown = json.loads(run(["dvc", "exp", "show", "--json"], root).stdout)
    experiments = {
        exp["name"]: exp["revs"][0]["data"] for baseline in shown for exp in baseline.get("experiments") or []
    }
    assert set(experiments) == {"abl12"}
    data = experiments["abl12"]
    assert data["params"]["params.yaml"]["data"]["binding_ablation"]["n_programs"] == 12
    baseline = next(b["data"] for b in shown if b.get("experiments"))  # the commit it branched from
    assert baseline["params"]["params.yaml"]["data"]["binding_ablation"]["n_programs"] != 12
    binding = data["metrics"]["reports/metrics/binding.json"]["data"]
    assert {"accuracy", "phases", "mechanisms", "aids"} <= set(binding)  # the headline numbers, as the table shows them
    table = run(["dvc", "exp", "show", "--no-pager", "--md"], root).stdout
    assert "abl12" in table and "binding_ablation.n_programs" in table
