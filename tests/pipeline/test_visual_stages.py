"""Visual-dialogue data stages at the tiny profile: scenes -> VisDial extraction -> cached DINOv2 features."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import ROOT
from refusals import assert_names
from safetensors.torch import load_file

from emergence.core.pipeline import stage_command
from emergence.core.train.checkpoint import list_checkpoints, load_checkpoint

# this checkout's src first, even where the venv's editable install points at another checkout
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]), "OMP_NUM_THREADS": "1"}
SCENES, FEATURES = "data/visual/scenes", "data/visual/features"


def stage(root: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *stage_command(name, ROOT), *args],
        cwd=root,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_ok(root: Path, *names: str, args: tuple[str, ...] = ()) -> str:
    err = ""
    for name in names:
        proc = stage(root, name, *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
        err += proc.stderr
    return err


def set_param(root: Path, dotted: str, value) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    *parents, key = dotted.split(".")
    node = params
    for part in parents:
        node = node[part]
    node[key] = value
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("visual")
    shutil.copy(ROOT / "params.yaml", root / "params.yaml")
    shutil.copytree(ROOT / "resources", root / "resources")  # the noun list the scenes draw from
    subprocess.run(
        [sys.executable, "-m", "emergence.core.profile", str(ROOT / "profiles" / "tiny.yaml")],
        cwd=root,
        env=ENV,
        check=True,
        capture_output=True,
    )
    set_param(root, "base.threads", 1)
    run_ok(root, "visual_scenes", "visdial_extract")
    return root


def test_features_cover_every_dialog_image_and_say_the_encoder_is_random(workspace):
    log = run_ok(workspace, "dino_features")
    assert "24 images encoded, 0 read from the cache (encoder not pretrained)" in log
    info = json.loads((workspace / FEATURES / "encoder.json").read_text())
    assert info["pretrained"] is False and info["note"] == "encoder not pretrained"
    assert info["encoder_id"].startswith("random-init:facebook/dinov2-small:seed0")
    images = pd.read_parquet(workspace / FEATURES / "images.parquet")
    dialogs = pd.read_parquet(workspace / "data/visual/dialogs.parquet")
    assert sorted(images["image_id"]) == sorted(dialogs["image_id"].unique())
    features = load_file(workspace / FEATURES / "features.safetensors")["features"]
    assert tuple(features.shape) == (24, 4, 384)  # pool_grid 2 -> 4 tokens of dinov2-small width


def test_adding_one_image_encodes_only_that_image(workspace, tmp_path):
    root = tmp_path / "grow"
    shutil.copytree(workspace, root)
    first = run_ok(root, "dino_features")
    assert "read from the cache" in first
    before = (root / FEATURES / "features.safetensors").read_bytes()
    set_param(root, "visual_scenes.n_images", 25)  # the first 24 scenes stay the same
    log = run_ok(root, "visual_scenes", "visdial_extract", "dino_features")
    assert "1 images encoded, 24 read from the cache" in log
    features = load_file(root / FEATURES / "features.safetensors")["features"]
    assert features.shape[0] == 25
    assert (root / FEATURES / "features.safetensors").read_bytes() != before


def break_and_run(workspace: Path, tmp_path: Path, edit) -> tuple[subprocess.CompletedProcess, Path]:
    root = tmp_path / "bad"
    shutil.copytree(workspace, root)
    shutil.rmtree(root / FEATURES, ignore_errors=True)
    edit(root)
    return stage(root, "dino_features"), root


def test_missing_image_names_it_and_writes_nothing(workspace, tmp_path):
    proc, root = break_and_run(workspace, tmp_path, lambda r: (r / SCENES / "images" / "000000000003.png").unlink())
    assert proc.returncode == 1
    # the folder searched, the image without a file, and the key that would leave it out
    line = proc.stderr.strip().splitlines()[-1]
    assert_names(line, f"error: {SCENES}: ", "image_id 3", "dino_features.skip_bad_images")
    assert not (root / FEATURES).exists()


def test_corrupt_image_names_the_file_unless_skipping_is_asked(workspace, tmp_path):
    def corrupt(root: Path) -> None:
        (root / SCENES / "images" / "000000000002.png").write_bytes(b"not a png")
        shutil.rmtree(root / "data/cache", ignore_errors=True)

    proc, root = break_and_run(workspace, tmp_path, corrupt)
    assert proc.returncode == 1
    assert_names(proc.stderr.strip().splitlines()[-1], "000000000002.png: ", "dino_features.skip_bad_images")
    assert not (root / FEATURES).exists()
    set_param(root, "dino_features.skip_bad_images", True)
    run_ok(root, "dino_features")
    info = json.loads((root / FEATURES / "encoder.json").read_text())
    assert info["skipped"] == ["000000000002.png"] and info["n_images"] == 23


def test_dialog_with_a_bad_answer_index_is_named(workspace, tmp_path):
    root = tmp_path / "json"
    shutil.copytree(workspace, root)
    path = root / SCENES / "visdial_synthetic.json"
    doc = json.loads(path.read_text())
    doc["data"]["dialogs"][4]["dialog"][1]["answer"] = 10_000
    path.write_text(json.dumps(doc))
    (root / "data/visual/dialogs.parquet").unlink()
    proc = stage(root, "visdial_extract")
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1
    assert_names(line, "visdial_synthetic.json: dialog 4 (image_id 5)", "round 1", "answer index 10000")
    assert not (root / "data/visual/dialogs.parquet").exists()


def assert_prefix_standardised_with_training_images(root: Path) -> None:
    """The image run's checkpoints carry the mean and std of its training images' features, not the held-out ones'."""
    features = load_file(root / FEATURES / "features.safetensors")["features"]
    images = pd.read_parquet(root / FEATURES / "images.parquet")
    row = dict(zip(images["image_id"], images["row"]))
    dialogs = pd.read_parquet(root / "data/visual/dialogs.parquet")
    held_out = set(pd.read_parquet(root / "data/visual/eval.parquet")["turn"])
    rows = sorted({row[i] for k, i in enumerate(dialogs["image_id"]) if k not in held_out})
    assert len(rows) < len(features)  # some images are only seen at evaluation
    flat = features[rows].reshape(-1, features.shape[-1]).double()
    model = load_checkpoint(list_checkpoints(root / "data/visual/runs/image_transformer4_seed0")[-1][1])[0]
    torch.testing.assert_close(model.prefix_mean, flat.mean(0).float())
    torch.testing.assert_close(model.prefix_std, flat.std(0).float())


def test_attention_stages_run_on_both_settings_and_feed_the_report(tiny_run):
    """The session's tiny DVC run holds both settings' transformer4 chain (train, gain, saliency, heads,
    ablation) and the page; that each stage writes the same bytes twice, the two engines' runs show."""
    root = tiny_run
    n_eval = len(pd.read_parquet(root / "data/visual/eval.parquet"))
    for setting in ("caption", "image"):
        run = f"{setting}_transformer4_seed0.parquet"
        saliency = pd.read_parquet(root / "data/visual/saliency" / run)
        assert list(saliency.columns) == ["setting", "model", "seed", "step", "layer", "head", "metric", "value"]
        assert set(saliency["setting"]) == {setting} and saliency["value"].between(0, 1).all()
        heads = pd.read_parquet(root / "data/visual/heads" / run)
        assert {"setting", "step", "layer", "head", "kind", "share"} <= set(heads.columns)
        ablation = pd.read_parquet(root / "data/visual/ablation" / run)
        assert len(ablation) == saliency["step"].nunique() * 2 * n_eval  # checkpoints x kinds x dialogs
    assert_prefix_standardised_with_training_images(root)
    page = (root / "reports/grounding_visual.html").read_text()
    assert all(title in page for title in ("Saliency flow by layer", "Aggregate and gather heads", "Head ablation"))
    assert "image / transformer4" in page and "caption / transformer4" in page
    metrics = json.loads((root / "reports/metrics/grounding_visual.json").read_text())
    assert set(metrics["ablation"]) == {
        f"{s}_transformer4_{k}" for s in ("caption", "image") for k in ("aggregate", "gather")
    }
