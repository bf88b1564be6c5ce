"""Checkpoint round trips, every bad-checkpoint case, and resume state."""

from __future__ import annotations

import errno
import json
import re
import shutil
from pathlib import Path

import pytest
import safetensors.torch
import torch
from refusals import assert_names, refuses
from tiny_models import tiny

from emergence.core.io import PipelineError
from emergence.core.train.checkpoint import (
    find_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_named_checkpoint,
    load_resume_state,
    run_fingerprint,
    save_checkpoint,
    save_resume_state,
)

IDX = torch.arange(8).reshape(2, 4)


@pytest.mark.parametrize("tie", [False, True])
def test_round_trip_gives_identical_logits(tmp_path, tie):
    model = tiny(tie=tie).eval()
    step_dir = save_checkpoint(model, tmp_path, 7, {"note": "x"})
    assert step_dir == tmp_path / "step7"
    loaded, info = load_checkpoint(step_dir)
    assert info["step"] == 7 and info["arch"] == "tiny_mlp_test" and info["meta"] == {"note": "x"}
    assert info["config"]["tie"] is tie and not loaded.training
    assert torch.equal(loaded(IDX)[0], model(IDX)[0])
    assert (loaded.head.weight is loaded.emb.weight) is tie
    assert [p.name for p in tmp_path.iterdir()] == ["step7"]  # no temporaries left behind


def test_config_json_is_ours(tmp_path):
    save_checkpoint(tiny(d=4), tmp_path, 0, {})
    info = json.loads((tmp_path / "step0" / "config.json").read_text())
    assert info == {
        "format": "emergence-checkpoint-v1",
        "arch": "tiny_mlp_test",
        "config": {"vocab": 8, "d": 4, "dropout": 0.0, "tie": False},
        "step": 0,
        "meta": {},
    }


@pytest.mark.parametrize("value", [float("nan"), float("-inf")])
def test_weights_holding_a_nan_or_inf_are_refused_naming_the_file(tmp_path, value):
    model = tiny()
    with torch.no_grad():
        model.emb.weight[3, 1] = value
    step_dir = save_checkpoint(model, tmp_path, 5, {})
    with refuses(step_dir / "model.safetensors", "non-finite", "emb.weight"):  # the tensor too
        load_checkpoint(step_dir)


def test_a_run_that_recorded_its_divergence_loads_its_nan_weights(tmp_path):
    # on_nonfinite: continue trains on past a nan loss and says so in every later checkpoint
    model = tiny()
    with torch.no_grad():
        model.emb.weight.fill_(float("nan"))
    loaded, info = load_checkpoint(save_checkpoint(model, tmp_path, 5, {"diverged_at": 3}))
    assert info["meta"]["diverged_at"] == 3 and torch.isnan(loaded.emb.weight).all()


@pytest.mark.parametrize(
    ("odd", "meta"),
    [
        (dict(d=8), {"data_fingerprint": "corpus A"}),  # another model
        (dict(), {"data_fingerprint": "corpus B"}),  # the same model trained on other data
    ],
    ids=["model", "data"],
)
def test_a_step_copied_in_from_another_run_is_named(tmp_path, odd, meta):
    run = tmp_path / "run"
    for step in (0, 10, 20):  # one run; its later steps recorded a divergence, on purpose
        save_checkpoint(
            tiny(seed=step), run, step, {"data_fingerprint": "corpus A", **({"diverged_at": 9} if step else {})}
        )
    assert [s for s, _ in list_checkpoints(run)] == [0, 10, 20]
    other = save_checkpoint(tiny(**odd), tmp_path / "other", 30, meta)
    shutil.copytree(other, run / "step30")
    with refuses(run / "step30", "another run", "3"):  # the odd one, and how many agree
        list_checkpoints(run)


def test_save_replaces_existing_step(tmp_path):
    save_checkpoint(tiny(seed=1), tmp_path, 3, {})
    newer = tiny(seed=2).eval()
    save_checkpoint(newer, tmp_path, 3, {})
    loaded, _ = load_checkpoint(tmp_path / "step3")
    assert torch.equal(loaded(IDX)[0], newer(IDX)[0])


def _saved(tmp_path):
    return save_checkpoint(tiny(), tmp_path, 5, {})


def test_truncated_weights(tmp_path):
    weights = _saved(tmp_path) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-50])
    with refuses(weights, "truncated"):
        load_checkpoint(tmp_path / "step5")


def test_foreign_json(tmp_path):
    config = _saved(tmp_path) / "config.json"
    config.write_text(json.dumps({"model_type": "gpt2", "n_embd": 16}))  # a Hugging Face config
    with refuses(config, "foreign"):
        load_checkpoint(tmp_path / "step5")


def test_invalid_json(tmp_path):
    config = _saved(tmp_path) / "config.json"
    config.write_text("{not json")
    with refuses(config, "JSON"):
        load_checkpoint(tmp_path / "step5")


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_missing_file(tmp_path, name):
    (_saved(tmp_path) / name).unlink()
    with refuses(tmp_path / "step5" / name, "not found"):
        load_checkpoint(tmp_path / "step5")


def test_missing_dir(tmp_path):
    with refuses(tmp_path / "step9", "not found"):
        load_checkpoint(tmp_path / "step9")


def _edit_config(step_dir, **changes):
    path = step_dir / "config.json"
    info = json.loads(path.read_text())
    info.update(changes)
    path.write_text(json.dumps(info))


def test_unknown_arch(tmp_path):
    _edit_config(_saved(tmp_path), arch="no_such_arch")
    with refuses(tmp_path / "step5" / "config.json.arch", "'no_such_arch'"):
        load_checkpoint(tmp_path / "step5")


def test_shape_mismatch(tmp_path):
    _edit_config(_saved(tmp_path), config={"vocab": 8, "d": 12, "dropout": 0.0, "tie": False})
    with refuses(tmp_path / "step5" / "model.safetensors", "size mismatch"):
        load_checkpoint(tmp_path / "step5")


def test_key_mismatch(tmp_path):
    weights = _saved(tmp_path) / "model.safetensors"
    state = safetensors.torch.load_file(weights)
    state["extra.weight"] = state.pop("ln.weight")
    safetensors.torch.save_file(state, weights)
    with refuses(weights, "ln.weight"):  # the tensor missing
        load_checkpoint(tmp_path / "step5")


def test_list_checkpoints_sorted_numerically(tmp_path):
    model = tiny()
    for step in (10, 2, 9):
        save_checkpoint(model, tmp_path, step, {})
    (tmp_path / "metrics.parquet").write_bytes(b"")
    (tmp_path / "stepx").mkdir()
    assert list_checkpoints(tmp_path) == [(s, tmp_path / f"step{s}") for s in (2, 9, 10)]
    with refuses(tmp_path / "nowhere", "not found"):
        list_checkpoints(tmp_path / "nowhere")


def test_final_is_the_highest_step_and_a_name_its_own_step(tmp_path):
    # steps 2, 9, 10 hold other weights each; by name, step9 sorts after step10
    models = {step: tiny(seed=step) for step in (10, 2, 9)}
    for step, model in models.items():
        save_checkpoint(model, tmp_path, step, {})
    assert find_checkpoint(tmp_path, "final") == (10, tmp_path / "step10")
    for name, step in (("final", 10), ("step9", 9), ("step2", 2)):
        got, model = load_named_checkpoint(tmp_path, name)
        assert got == step
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), models[step].state_dict().values()))
    with refuses("step3", tmp_path):
        find_checkpoint(tmp_path, "step3")


def test_fingerprint_covers_config_data_and_init():
    base = run_fingerprint({"lr": 1.0}, tiny(seed=0), "data-a")
    assert base == run_fingerprint({"lr": 1.0}, tiny(seed=0), "data-a")
    assert base != run_fingerprint({"lr": 2.0}, tiny(seed=0), "data-a")
    assert base != run_fingerprint({"lr": 1.0}, tiny(seed=0), "data-b")
    assert base != run_fingerprint({"lr": 1.0}, tiny(seed=1), "data-a")
    assert base != run_fingerprint({"lr": 1.0}, tiny(seed=0, d=8), "data-a")


def _trained_pair():
    model = tiny(dropout=0.5)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(IDX, IDX)[1].backward()
    opt.step()
    return model, opt


def test_resume_state_round_trip(tmp_path):
    model, opt = _trained_pair()
    path = tmp_path / "resume"
    save_resume_state(path, model=model, optimizer=opt, step=4, tokens=32, rows=[{"step": 0}], fingerprint="fp")
    expected_draw = torch.rand(3)  # RNG continues from the saved state

    fresh = tiny(seed=5, dropout=0.5)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    torch.manual_seed(123)
    assert load_resume_state(path, "fp", fresh, fresh_opt, "cpu") == {"step": 4, "tokens": 32, "rows": [{"step": 0}]}
    assert torch.equal(torch.rand(3), expected_draw)
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b)
    exp_avg = opt.state_dict()["state"][0]["exp_avg"]
    assert torch.equal(fresh_opt.state_dict()["state"][0]["exp_avg"], exp_avg)


def test_resume_state_fingerprint_mismatch_or_garbage(tmp_path, capsys):
    model, opt = _trained_pair()
    path = tmp_path / "resume"
    assert load_resume_state(path, "fp", model, opt, "cpu") is None  # absent: silently fresh
    save_resume_state(path, model=model, optimizer=opt, step=4, tokens=32, rows=[], fingerprint="fp")
    before = [t.clone() for t in model.state_dict().values()]
    other = tiny(seed=9, dropout=0.5)
    assert load_resume_state(path, "other-fp", other, torch.optim.AdamW(other.parameters()), "cpu") is None
    assert "(fingerprint mismatch); starting fresh" in capsys.readouterr().err
    assert not torch.equal(other.emb.weight, before[0])  # nothing was loaded
    (path / "state.safetensors").write_bytes(b"garbage")
    assert load_resume_state(path, "fp", model, opt, "cpu") is None
    assert "unreadable resume state" in capsys.readouterr().err
    path.rename(tmp_path / "elsewhere")
    path.write_bytes(b"a file where the folder should be, e.g. a pickle")  # never unpickled
    assert load_resume_state(path, "fp", model, opt, "cpu") is None
    assert "unreadable resume state" in capsys.readouterr().err


# ---- a full disk ----------------------------------------------------------------


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("writer", ["safetensors", "json"])
def test_a_full_disk_is_one_line_and_keeps_the_resume_state(tmp_path, monkeypatch, writer):
    model, opt = _trained_pair()
    path = tmp_path / "resume"
    save_resume_state(path, model=model, optimizer=opt, step=4, tokens=32, rows=[{"step": 0}], fingerprint="fp")
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    if writer == "safetensors":
        monkeypatch.setattr(safetensors.torch, "save_file", _no_space)
    else:
        monkeypatch.setattr(Path, "write_text", _no_space)
    with pytest.raises(PipelineError) as full:
        save_resume_state(path, model=model, optimizer=opt, step=8, tokens=64, rows=[{"step": 0}], fingerprint="fp")
    tensors = safetensors.torch.load_file(path / "state.safetensors")
    needed = sum(t.numel() * t.element_size() for t in tensors.values()) + len((path / "state.json").read_bytes())
    message, free = str(full.value), shutil.disk_usage(tmp_path).free  # others write meanwhile: roughly
    assert_names(message, path, "no space left", f"{needed:,}", "kept")  # what it needs; the last state is kept
    said = int(re.search(r"bytes, ([\d,]+) free", message).group(1).replace(",", ""))
    assert abs(said - free) < 0.01 * free
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["resume"]  # no temporary left behind


def test_another_write_failure_is_one_line_naming_it(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(safetensors.torch, "save_file", broken)
    with refuses(tmp_path / "step3", "Input/output error"):
        save_checkpoint(tiny(), tmp_path, 3, {})
    assert list(tmp_path.iterdir()) == []
