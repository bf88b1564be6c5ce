"""The paper binding run in its CPU smoke mode: programs, training on the paper's checkpoint schedule,
then the trajectory, its phases, residual patching and heads per dereference step at every checkpoint,
written as a few small tables (the weights never)."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from bench import gpu, paper_binding
from emergence.core.train.schedule import checkpoint_steps

COLUMNS = ["seed", "step", "layer", "head", "position", "position_class", "chain_depth", "metric", "value", "n"]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    d = tmp_path_factory.mktemp("paper_binding")
    args = ["--device", "cpu", "--smoke", "--only", "paper_binding", "--tables", str(d / "tables")]
    gpu.main([*args, "--out", str(d / "gpu_check.json"), "--doc", str(d / "bench.md")])
    tables = d / "tables"
    return (
        json.loads((tables / "run.json").read_text()),
        {name: pd.read_parquet(tables / f"{name}.parquet") for name in ("trajectory", "phases", "patching")},
        d,
    )


def test_only_small_tables_come_back(smoke):
    _, _, d = smoke
    files = sorted(p.name for p in (d / "tables").iterdir())
    assert files == ["patching.parquet", "phases.parquet", "run.json", "trajectory.parquet"]
    assert all((d / "tables" / f).stat().st_size < 16 * 2**20 for f in files)
    check = json.loads((d / "gpu_check.json").read_text())
    assert check["paper_binding"]["checkpoints"] == smoke[0]["checkpoints"]
    assert "- Paper binding run (seed 0, fp32, eager): 240 of 240 steps" in (d / "bench.md").read_text()


def test_checkpoints_follow_the_schedule_and_every_one_is_analysed(smoke):
    run, tables, _ = smoke
    t = paper_binding.SMOKE_TRAIN
    assert run["checkpoints"] == checkpoint_steps(t["steps"], 0, t["n_log_checkpoints"], t["checkpoint_every"])
    assert run["steps"] == t["steps"] and sorted(run["patched"]) == run["checkpoints"] and run["not_patched"] == []
    sizes = paper_binding.SMOKE_SIZES
    assert run["generator"]["programs"] == sizes["n_programs"]
    assert run["generator"]["processes"] == min(os.cpu_count(), sizes["n_programs"] // sizes["chunk"])  # one a core
    traj = tables["trajectory"]
    acc = traj[traj["metric"] == "accuracy"]
    hops = list(range(-1, paper_binding.SMOKE_PROGRAMS["max_hops"] + 1))
    assert {(s, h) for s, h in zip(acc["step"], acc["hops"])} == {(s, h) for s in run["checkpoints"] for h in hops}
    assert sorted(traj.loc[traj["metric"] == "train_loss", "step"]) == list(range(t["steps"]))
    phases = tables["phases"]
    assert phases["name"].tolist() == ["random", "heuristic", "traversal"]
    assert [p["start_step"] for p in run["phases"]] == phases["start_step"].tolist()


def test_patching_covers_every_checkpoint_layer_position_and_depth(smoke):
    run, tables, _ = smoke
    patching = tables["patching"]
    assert list(patching.columns) == COLUMNS
    summary = patching[patching["metric"] == "pairs_correct"]
    assert sorted(summary["step"]) == run["checkpoints"] and (summary["n"] == 48).all()
    answered = summary.loc[summary["value"] > 0, "step"].tolist()
    assert run["checkpoints"][-1] in answered  # the trained model answers some pairs: rows to check below
    n_layers, n_heads = paper_binding.SMOKE_MODEL["n_layers"], paper_binding.SMOKE_MODEL["n_heads"]
    max_hops = paper_binding.SMOKE_PROGRAMS["max_hops"]
    for step in answered:
        at = patching[(patching["step"] == step) & (patching["metric"] == "patch_success")]
        for position in ("chain_rhs", "chain_newline"):  # both positions, every layer, every chain depth
            cells = at[at["position_class"] == position]
            assert set(cells["layer"]) == set(range(n_layers + 1))
            assert set(range(1, max_hops + 1)) <= set(cells["chain_depth"])  # depth 0's rhs is the root constant
        assert set(at.loc[at["position_class"] == "chain_root", "chain_depth"]) == {0}
        heads = patching[(patching["step"] == step) & (patching["metric"] == "head_step_success")]
        assert {(r.layer, r.head, r.chain_depth) for r in heads.itertuples()} == {
            (layer, head, k) for layer in range(n_layers) for head in range(n_heads) for k in range(1, max_hops + 1)
        }
        assert heads["value"].between(0, 1).all()


def test_spread_patches_the_last_checkpoint_first_then_covers_the_run_evenly():
    assert paper_binding.spread(5) == [4, 0, 2, 3, 1]
    assert sorted(paper_binding.spread(9)) == list(range(9)) and paper_binding.spread(9)[:3] == [8, 0, 4]
    assert paper_binding.spread(1) == [0]
