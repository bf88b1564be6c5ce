"""What each binding analysis stage feeds its analysis: the split and rows, the checkpoint, the seed.

The fixture gives every choice a wrong answer to take: programs in three splits and other sets, seeds 0
and 1 with different weights, five checkpoints of distinct weights, counts that divide nothing."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from feeds import ran, save_run, spy, spy_listing, step_of, tiny_params, workspace

from emergence.core.io import write_parquet
from emergence.core.models.registry import build_model
from emergence.core.train.checkpoint import find_checkpoint, load_checkpoint, save_checkpoint
from emergence.studies.binding.batches import IGNORE, encode_programs
from emergence.studies.binding.patching import make_counterfactual_pairs
from emergence.studies.binding.program_io import load_programs
from emergence.studies.binding.sets import load_data_params
from emergence.studies.binding.tokenizer import CharTokenizer
from stages.binding import ablation, aid_eval, llc, patching, stress, trajectory
from stages.binding.data import build_programs

TOK = CharTokenizer()
STEPS = [0, 7, 13, 20, 26]  # the tiny profile's curve_every (10) divides 0 and 20 only
SEED = 1  # the tiny profile's seeds are [0, 1]: seed 0's run is the wrong one to read
pytestmark = pytest.mark.usefixtures("one_thread")


def table(*args, **kwargs) -> pd.DataFrame:
    return pd.DataFrame({"value": [0.5]})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """data/ of a binding project: programs, and runs of seeds 0 and 1 plus aid runs, all weights distinct."""
    root = tmp_path_factory.mktemp("binding")
    params = tiny_params()
    write_parquet(build_programs(*load_data_params(params)), root / "data/binding/programs.parquet")
    programs = load_programs(root / "data/binding/programs.parquet")  # with the program_id the stages see
    model = {k: v for k, v in params["binding_model"].items() if k != "arch"} | {"d_vocab": len(TOK)}
    runs = {
        name: save_run(root / "data/binding" / name, STEPS, "transformer", model)
        for name in ("runs/seed0", "runs/seed1", "aid_runs/no_conv/seed1", "aid_runs/plain/seed1")
    }
    return root, programs, runs


@pytest.fixture
def project(built, tmp_path, monkeypatch):
    """A working directory with the built data, params edited by the returned function."""
    root, programs, runs = built
    shutil.copytree(root / "data", tmp_path / "data")
    runs = {name: {step: tmp_path / p.relative_to(root) for step, p in paths.items()} for name, paths in runs.items()}
    return lambda **edits: workspace(tmp_path, monkeypatch, edits), programs, runs


def rows(programs: pd.DataFrame, split: str, set_name: str = "main") -> pd.DataFrame:
    return programs[(programs["split"] == split) & (programs["set"] == set_name)]


def same_encoding(got, programs: pd.DataFrame, fmt: str = "answer_only") -> bool:
    want = encode_programs(programs["program"], programs["answer"], TOK, fmt)
    return all(torch.equal(getattr(got, f), getattr(want, f)) for f in ("idx", "targets", "answer_pos", "answers"))


def test_the_main_programs_split_in_the_order_train_val_test_of_binding_data_split(built):
    _, programs, _ = built
    data = tiny_params()["binding_data"]  # 400 programs: 0.8, 0.05, 0.15 -> 320, 20, 60
    counts = rows(programs, "train").shape[0], rows(programs, "val").shape[0], rows(programs, "test").shape[0]
    assert counts == tuple(round(data["n_programs"] * f) for f in data["split"]) == (320, 20, 60)
    assert set(programs.loc[programs["set"] != "main", "split"]) == {"test"}  # the grid and the stress suite


def test_patching_reads_test_pairs_drawn_with_the_seed_at_the_named_checkpoint(project, monkeypatch, capsys):
    params, programs, runs = project
    params(binding_patching={"checkpoint": "step13", "n_pairs": 5})
    residual = spy(monkeypatch, patching, "patching_table", table)
    heads = spy(monkeypatch, patching, "head_step_table", table)
    ran(patching.main, ["--seed", str(SEED)], capsys)
    test = rows(programs, "test")
    want = make_counterfactual_pairs(test, np.random.default_rng(SEED), 5)
    for analysis in (residual, heads):  # both read the same model and pairs
        (model, pairs, tok), kw = analysis.one
        assert step_of(model, runs["runs/seed1"]) == [13] and kw["step"] == 13 and kw["seed"] == SEED
        pd.testing.assert_frame_equal(pairs, want)
        assert set(pairs["base"]) <= set(test["program"])


def test_ablation_scores_the_first_test_programs_at_the_named_checkpoint(project, monkeypatch, capsys):
    params, programs, runs = project
    params(binding_ablation={"checkpoint": "step7", "n_programs": 9, "modes": ["mean"]})
    analysis = spy(monkeypatch, ablation, "ablation_table", table)
    ran(ablation.main, ["--seed", str(SEED)], capsys)
    (model, data, hops, tok), kw = analysis.one
    first = rows(programs, "test").head(9)
    assert step_of(model, runs["runs/seed1"]) == [7] and (kw["step"], kw["seed"]) == (7, SEED)
    assert same_encoding(data, first) and hops.tolist() == first["hops"].tolist()
    assert kw["modes"] == ["mean"]


def trajectory_rows(run_dir, programs, tok, seed) -> pd.DataFrame:
    return pd.DataFrame({"seed": [seed], "step": [0], "metric": ["accuracy"], "hops": [-1], "value": [0.1]})


def test_trajectory_scores_test_programs_and_predicts_with_the_last_checkpoint(project, monkeypatch, capsys):
    params, programs, runs = project
    params(binding_trajectory={"n_programs": 11})
    traj = spy(monkeypatch, trajectory, "run_trajectory", trajectory_rows)
    phases = spy(monkeypatch, trajectory, "detect_phases", lambda t, p: pd.DataFrame({"phase": [1]}))
    predict = spy(monkeypatch, trajectory, "predict_answers", lambda model, data, tok: np.zeros(len(data), int))
    ran(trajectory.main, ["--seed", str(SEED)], capsys)
    (run_dir, scored, tok, seed), _ = traj.one
    first = rows(programs, "test").head(11)
    assert run_dir.resolve() == runs["runs/seed1"][0].parent.resolve() and seed == SEED
    pd.testing.assert_frame_equal(scored, first)
    assert phases.one[0][0] is traj.returned[0]
    # predictions: the last checkpoint, on the scored programs and the whole generalisation grid
    (model, data, tok), _ = predict.one
    evaluated = pd.concat([first, rows(programs, "test", "gen")])
    assert step_of(model, runs["runs/seed1"]) == [26] and same_encoding(data, evaluated)
    preds = pd.read_parquet(f"data/binding/predictions/seed{SEED}.parquet")
    assert preds["program_id"].tolist() == evaluated["program_id"].tolist() and set(preds["step"]) == {26}


def digit_answering_checkpoint(run_dir, step: int) -> torch.nn.Module:
    """A checkpoint at `step` of the run (its model and meta) whose weights, drawn from a fixed seed, can
    only write digits: its unembedding has zero rows for every other token. Returned in eval mode."""
    _, info = load_checkpoint(find_checkpoint(run_dir, "final")[1])
    torch.manual_seed(5)  # answers vary (six digits) and some are right (6 of 52), whatever the tmp path
    model = build_model(info["arch"], info["config"])
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
        others = torch.ones(len(TOK), dtype=torch.bool)
        others[TOK.digit_ids] = False
        model.unembed.weight[others] = 0.0
    save_checkpoint(model, run_dir, step, info["meta"])
    return model.eval()


def greedy_answer(model: torch.nn.Module, program: str) -> int:
    """The model's top token after the program alone (no batch, no padding), as a digit; -1 if no digit."""
    with torch.no_grad():
        logits, _ = model(torch.tensor([TOK.encode(program)]))
    top = TOK.vocab[int(logits[0, -1].argmax())]
    return int(top) if top.isdigit() else -1


def test_trajectory_predictions_are_the_last_checkpoints_answers_marked_right_or_wrong(project, monkeypatch, capsys):
    params, programs, runs = project
    params()
    run_dir = runs["runs/seed1"][26].parent
    model = digit_answering_checkpoint(run_dir, 33)  # after the run's five: the last one
    spy(monkeypatch, trajectory, "run_trajectory", trajectory_rows)
    spy(monkeypatch, trajectory, "detect_phases", lambda t, p: pd.DataFrame({"phase": [1]}))
    ran(trajectory.main, ["--seed", str(SEED)], capsys)
    preds = pd.read_parquet(f"data/binding/predictions/seed{SEED}.parquet")
    evaluated = pd.concat([rows(programs, "test").head(40), rows(programs, "test", "gen")])  # tiny n_programs: 40
    assert preds["program_id"].tolist() == evaluated["program_id"].tolist()
    assert preds["answer"].tolist() == evaluated["answer"].tolist()
    assert set(preds["seed"]) == {SEED} and set(preds["step"]) == {33}
    assert preds["pred"].tolist() == [greedy_answer(model, p) for p in evaluated["program"]]
    assert set(preds["pred"]) <= set(range(10)) and preds["pred"].nunique() > 1  # digits the model wrote
    assert preds["correct"].tolist() == (preds["pred"] == preds["answer"]).tolist()
    assert 0 < preds["correct"].sum() < len(preds)  # some right, some wrong


def test_stress_scores_the_suite_on_the_curve_and_the_grid_at_the_named_step(project, monkeypatch, capsys):
    params, programs, runs = project
    params(binding_stress={"checkpoint": "step13", "curve_every": 10})

    def scored(model, progs, seed, step) -> pd.DataFrame:
        return pd.DataFrame({"seed": [seed], "step": [step], "set": ["x"], "n": [1], "correct": [0]})

    analysis = spy(monkeypatch, stress, "stress_accuracy", scored)
    ran(stress.main, ["--seed", str(SEED)], capsys)
    suite = programs[programs["set"].str.match(r"(stress|ref)_")]
    grid = rows(programs, "test", "gen")
    assert set(suite["set"].str.split("_").str[0]) == {"stress", "ref"}  # both kinds exist to be fed
    fed = {}
    for (model, progs, seed, step), _ in analysis.calls:
        assert seed == SEED and step_of(model, runs["runs/seed1"]) == [step]
        fed[step] = progs
    assert sorted(fed) == [0, 13, 20]  # the named step and the multiples of curve_every
    for step, progs in fed.items():
        want = pd.concat([suite, grid]) if step == 13 else suite
        assert sorted(progs["program_id"]) == sorted(want["program_id"]), step
    written = pd.read_parquet(f"data/binding/stress/seed{SEED}.parquet")
    assert written.loc[written["named"], "step"].tolist() == [13]


def test_aid_eval_measures_the_aid_run_on_test_programs_like_the_default(project, monkeypatch, capsys):
    params, programs, runs = project
    params(binding_trajectory={"n_programs": 7}, binding_patching={"checkpoint": "step20", "n_pairs": 3})
    traj = spy(monkeypatch, aid_eval, "run_trajectory", trajectory_rows)
    spy(monkeypatch, aid_eval, "detect_phases", lambda t, p: pd.DataFrame({"phase": [1]}))
    patch = spy(monkeypatch, aid_eval, "patching_table", table)
    rows_of = spy(monkeypatch, aid_eval, "aid_rows", lambda aid, seed, t, ph, pa: pd.DataFrame({"aid": [aid]}))
    ran(aid_eval.main, ["--aid", "no_conv", "--seed", str(SEED)], capsys)
    (run_dir, scored, tok, seed), _ = traj.one
    aid_run = runs["aid_runs/no_conv/seed1"]
    assert run_dir.resolve() == aid_run[0].parent.resolve() and seed == SEED
    pd.testing.assert_frame_equal(scored, rows(programs, "test").head(7))
    (model, pairs, tok), kw = patch.one
    assert step_of(model, aid_run) == [20] and (kw["step"], kw["seed"]) == (20, SEED)
    pd.testing.assert_frame_equal(
        pairs, make_counterfactual_pairs(rows(programs, "test"), np.random.default_rng(SEED), 3)
    )
    assert rows_of.one[0][:2] == ("no_conv", SEED)


def test_llc_samples_every_kth_checkpoint_on_training_programs_in_the_run_format(project, monkeypatch, capsys):
    params, programs, runs = project
    params(llc={"every": 2}, binding_train={"format": "line_values"})  # not encode_programs' default format
    fed = spy_listing(monkeypatch, llc, "llc_table", table)
    ran(llc.main, ["--seed", str(SEED)], capsys)
    (ckpts, data, loss_fn, p, seed), _ = fed.one
    assert [s for s, _ in ckpts] == [0, 13, 26] and seed == SEED and p.every == 2
    assert all(step_of(model, runs["runs/seed1"]) == [s] for s, model in ckpts)
    train = rows(programs, "train")
    want = encode_programs(train["program"], train["answer"], TOK, "line_values")
    assert (want.targets != IGNORE).sum() > len(want)  # more targets than answer_only's one a program
    assert torch.equal(data, torch.cat([want.idx, want.targets], dim=1))
