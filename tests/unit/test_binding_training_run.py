"""train_binding and run_trajectory in-process, at the tiny profile: what the training loop is handed
(initial weights, batches, fingerprint, validation score) is rebuilt here from the params by another route,
and the trajectory is each checkpoint scored anew plus the loop's logged rows."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from refusals import assert_refused, refuses

from emergence.core.config import load_base
from emergence.core.io import PipelineError, file_sha256, write_parquet
from emergence.core.models.registry import build_model
from emergence.core.profile import apply_profile
from emergence.core.train.checkpoint import list_checkpoints, load_checkpoint
from emergence.studies.binding import training
from emergence.studies.binding.batches import encode_programs, predict_answers, sampler
from emergence.studies.binding.sets import load_data_params, load_program_config
from emergence.studies.binding.stream import stream_sampler
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.trajectory import checkpoint_rows, run_trajectory, training_rows
from stages.binding.data import build_programs

ROOT = Path(__file__).resolve().parents[2]
TOK = CharTokenizer()


def tiny_params(tmp: Path, **train) -> dict:
    """params.yaml with the tiny profile, programs at `tmp`, and binding_train changed by `train`."""
    path = tmp / "params.yaml"
    shutil.copy(ROOT / "params.yaml", path)
    apply_profile(str(ROOT / "profiles" / "tiny.yaml"), path)
    params = yaml.safe_load(path.read_text())
    params["paths"]["binding_programs"] = str(tmp / "programs.parquet")
    params["binding_train"].update(steps=6, checkpoint_every=3, eval_every=3, n_log_checkpoints=0, **train)
    return params


@pytest.fixture(scope="module")
def programs_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("binding_programs")
    data, cfg = load_data_params(tiny_params(tmp))
    write_parquet(build_programs(data, cfg), tmp / "programs.parquet")
    return tmp


def run(tmp: Path, programs_dir: Path, monkeypatch, seed: int, **train) -> tuple[dict, dict, Path]:
    """Train with a spy on the loop: (params, what the loop was handed, the published run)."""
    params = tiny_params(programs_dir, **train)
    handed = {}
    real = training.train

    def spy(model, batch_fn, cfg, **kw):
        handed.update(weights={k: v.clone() for k, v in model.state_dict().items()}, batch_fn=batch_fn, cfg=cfg, **kw)
        return real(model, batch_fn, cfg, progress=False, **kw)

    def stream_spy(*args):
        handed["stream_args"] = args
        return stream_sampler(*args)

    monkeypatch.setattr(training, "train", spy)
    monkeypatch.setattr(training, "stream_sampler", stream_spy)
    out = tmp / "run"
    training.train_binding(params, seed, out, tmp / "scratch", where="a_stage")
    return params, handed, out


def val_accuracy(model, programs: pd.DataFrame, n: int) -> float:
    rows = programs[(programs["split"] == "val") & (programs["set"] == "main")].head(n)
    data = encode_programs(rows["program"], rows["answer"], TOK)
    return float((predict_answers(model, data, TOK) == rows["answer"].to_numpy()).mean())


def test_the_stream_run_is_handed_what_the_params_say(tmp_path, programs_dir, monkeypatch):
    params, handed, out = run(tmp_path, programs_dir, monkeypatch, seed=3, eval_programs=7)
    programs = pd.read_parquet(programs_dir / "programs.parquet")
    # the stream: binding_programs with the default's overrides, never an evaluation program
    cfg = dataclasses.replace(load_program_config(params), hop_weight_power=0.0, distractor="planted", links="mixed")
    held_out = frozenset(programs.loc[programs["split"] != "train", "program"])
    digest = file_sha256(programs_dir / "programs.parquet")
    assert handed["data_fingerprint"] == f"line_values:stream:{cfg}:{digest}:eval7"  # how many are scored too
    fmt, tok, batch, seed, held = handed["stream_args"][1:]
    assert (fmt, tok.vocab, batch, seed, held) == ("line_values", TOK.vocab, 16, 3, held_out)  # seldom hit by a draw
    assert len(held_out) == 20 + 60 + 12 + 132  # val, test, the generalisation grid, the stress suite
    expected = stream_sampler(cfg, "line_values", TOK, 16, 3, held_out)
    for step in (0, 5):
        for got, want in zip(handed["batch_fn"](step), expected(step)):
            assert torch.equal(got, want)
    # the loop's config: the params' steps and batch, this seed, base's device; `where` passed on
    tc = handed["cfg"]
    assert (tc.steps, tc.batch_size, tc.seed, tc.device) == (6, 16, 3, load_base(params).device)
    assert (handed["where"], handed["out_dir"], handed["scratch_dir"]) == ("a_stage", out, tmp_path / "scratch")
    # initial weights: the model binding_model names, drawn under this seed
    torch.manual_seed(3)
    model_cfg = {**{k: v for k, v in params["binding_model"].items() if k != "arch"}, "d_vocab": len(TOK)}
    fresh = build_model(params["binding_model"].get("arch", "transformer"), model_cfg, "binding_model")
    assert handed["weights"].keys() == fresh.state_dict().keys()
    assert all(torch.equal(handed["weights"][k], v) for k, v in fresh.state_dict().items())
    # validation: the first eval_programs of the val split, scored by each logged checkpoint
    metrics = pd.read_parquet(out / "metrics.parquet")
    logged = metrics.dropna(subset=["val_accuracy"])
    assert logged["step"].tolist() == [0, 3, 6]
    for step, acc in zip(logged["step"], logged["val_accuracy"]):
        want = val_accuracy(load_checkpoint(out / f"step{step}")[0], programs, 7)
        assert acc == pytest.approx(want) and round(acc * 7, 9).is_integer()


def test_more_validation_programs_than_the_val_split_holds_are_refused(tmp_path, programs_dir, monkeypatch):
    """Scored on the 20 that exist while the params say 21, the accuracy would mislead."""
    with pytest.raises(PipelineError) as refused:
        run(tmp_path, programs_dir, monkeypatch, seed=0, eval_programs=21)
    assert_refused([str(refused.value)], "binding_train.eval_programs", 21, rule="20")
    assert not (tmp_path / "run").exists()


def test_the_fixed_set_run_samples_the_train_split(tmp_path, programs_dir, monkeypatch):
    # line_values, not encode_programs' default, so the format must be passed on to be seen
    params, handed, out = run(tmp_path, programs_dir, monkeypatch, seed=2, stream=False, format="line_values")
    programs = pd.read_parquet(programs_dir / "programs.parquet")
    tiny = yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text())["binding_train"]["eval_programs"]
    assert handed["data_fingerprint"] == f"line_values:{file_sha256(programs_dir / 'programs.parquet')}:eval{tiny}"
    train = programs[(programs["split"] == "train") & (programs["set"] == "main")]
    expected = sampler(encode_programs(train["program"], train["answer"], TOK, "line_values"), 16, 2)
    for step in (0, 4):
        for got, want in zip(handed["batch_fn"](step), expected(step)):
            assert torch.equal(got, want)
    assert handed["cfg"].seed == 2 and [s for s, _ in list_checkpoints(out)] == [0, 3, 6]


def test_the_loop_takes_device_precision_and_compile_from_base(programs_dir, tmp_path, monkeypatch):
    params = tiny_params(programs_dir)
    base = dict(device="cpu", precision="bf16", compile=True, compile_mode="max-autotune-no-cudagraphs")
    params["base"].update(base)  # none of them TrainConfig's default, so a dropped key shows

    class Handed(Exception):
        pass

    def spy(model, batch_fn, cfg, **kw):
        raise Handed(cfg)

    monkeypatch.setattr(training, "train", spy)
    with pytest.raises(Handed) as handed:
        training.train_binding(params, 0, tmp_path / "run", tmp_path / "scratch", where="binding_train")
    cfg = handed.value.args[0]
    assert {k: getattr(cfg, k) for k in base} == base


@pytest.mark.parametrize(
    "change, key, value",
    [
        ({"arch": "nosuch"}, "binding_model.arch", "'nosuch'"),
        ({"n_layerz": 2}, "binding_model.n_layerz", "'transformer'"),  # unknown for that architecture
    ],
)
def test_a_wrong_model_section_is_one_line_naming_its_key(programs_dir, tmp_path, change, key, value):
    params = tiny_params(programs_dir)
    params["binding_model"].update(change)
    with refuses(value) as e:
        training.train_binding(params, 0, tmp_path / "run", tmp_path / "scratch", where="binding_train")
    assert_refused([str(e.value)], key, value, rule="unknown")
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def trained(tmp_path_factory, programs_dir) -> Path:
    tmp = tmp_path_factory.mktemp("binding_run")
    training.train_binding(tiny_params(programs_dir), 1, tmp / "run", tmp / "scratch", where="binding_train")
    return tmp / "run"


def test_the_trajectory_scores_every_checkpoint_and_keeps_the_logged_rows(trained, programs_dir, capsys):
    programs = pd.read_parquet(programs_dir / "programs.parquet")
    test = programs[(programs["split"] == "test") & (programs["set"] == "main")].head(12)
    got = run_trajectory(trained, test, TOK, seed=5)
    assert re.search(r"(^|\r)checkpoints: 100%\|.*\| 3/3 ", capsys.readouterr().err)  # the bar says what it counts
    data = encode_programs(test["program"], test["answer"], TOK)
    rows = []
    for step in (0, 3, 6):
        model = load_checkpoint(trained / f"step{step}")[0]
        rows += checkpoint_rows(predict_answers(model, data, TOK), test, 5, step)
    logged = training_rows(pd.read_parquet(trained / "metrics.parquet"), 5)
    want = pd.concat([pd.DataFrame(rows), logged], ignore_index=True)
    pd.testing.assert_frame_equal(got, want)
    assert set(got["seed"]) == {5} and "diverged_at" not in set(got["metric"])


def test_the_trajectory_reads_divergence_from_the_last_checkpoint(trained, tmp_path, programs_dir):
    run_dir = tmp_path / "run"
    shutil.copytree(trained, run_dir)
    config = run_dir / "step6" / "config.json"
    info = json.loads(config.read_text())
    info["meta"] = {**(info.get("meta") or {}), "diverged_at": 4}  # only the last checkpoint carries it
    config.write_text(json.dumps(info))
    programs = pd.read_parquet(programs_dir / "programs.parquet")
    test = programs[(programs["split"] == "test") & (programs["set"] == "main")].head(3)
    got = run_trajectory(run_dir, test, TOK, seed=0)
    assert got.loc[got["metric"] == "diverged_at", ["step", "value"]].values.tolist() == [[4, 4.0]]


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda m: m.drop(columns="loss"), ["missing", "'loss'"]),
        (lambda m: m.assign(step=m["step"].astype(float)), ["'step'", "float64"]),
    ],
)
def test_a_metrics_file_of_another_shape_is_one_line_naming_it(trained, tmp_path, programs_dir, change, named):
    run_dir = tmp_path / "run"
    shutil.copytree(trained, run_dir)
    metrics = run_dir / "metrics.parquet"
    write_parquet(change(pd.read_parquet(metrics)), metrics)
    with refuses(metrics, "schema", *named):
        run_trajectory(run_dir, pd.read_parquet(programs_dir / "programs.parquet").head(2), TOK, 0)


def test_a_run_without_checkpoints_is_one_line(tmp_path):
    (tmp_path / "run").mkdir()
    with refuses(tmp_path / "run", "step{N}"):  # the run directory, and the checkpoints it lacks
        run_trajectory(tmp_path / "run", pd.DataFrame(), TOK, 0)
