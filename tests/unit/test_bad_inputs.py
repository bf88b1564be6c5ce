"""The issue's hardened-input cases, one test each: a clear one-line error (or, for a cache, a silent
redo), never a traceback, never a link followed out of a corpus folder."""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch
from refusals import assert_names, refuses
from safetensors.torch import save_file
from test_dino_features import images, params
from test_visdial import TINY

from emergence.core.chat import cha_files
from emergence.core.io import write_parquet
from emergence.studies.assoc.corpus import read_text_documents
from emergence.studies.binding.program_io import PROGRAM_COLUMNS, load_programs, subset
from emergence.studies.grounding.dino_features import encode_images, load_encoder
from emergence.studies.grounding.visdial import extract_dialogs
from emergence.studies.grounding.visual_inputs import features


def test_a_programs_table_with_no_rows_is_one_line(tmp_path):
    path = tmp_path / "programs.parquet"
    write_parquet(
        pd.DataFrame({c: pd.Series(dtype="int64" if k == "i" else object) for c, k in PROGRAM_COLUMNS.items()}), path
    )
    with refuses(path, "no programs"):
        load_programs(path)


def test_an_empty_split_is_named():
    rows = pd.DataFrame({"split": ["train", "test"], "set": ["main", "main"]})
    with refuses("programs", "'val'", "'main'"):  # the split and the set
        subset(rows, "val")


def test_subset_takes_one_split_of_one_set_in_table_order():
    rows = pd.DataFrame(
        {
            "split": ["val", "train", "val", "val", "val"],
            "set": ["main", "main", "stress", "main", "main"],
            "k": range(5),
        }
    )
    assert subset(rows, "val")["k"].tolist() == [0, 3, 4]
    assert subset(rows, "val", n=2)["k"].tolist() == [0, 3]
    assert subset(rows, "val", "stress")["k"].tolist() == [2]


@pytest.mark.parametrize("image_id", [10**30, 10**12, -5])
def test_an_image_id_no_image_file_can_carry_is_refused(tmp_path, image_id):
    obj = copy.deepcopy(TINY)
    obj["data"]["dialogs"][0]["image_id"] = image_id
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(obj))
    with refuses("tiny.json", "dialog 0", "image_id", "[0, 10^12)"):
        extract_dialogs(path)


def _features_params(root: Path) -> dict:
    return {"paths": {"visual_features": str(root)}}


@pytest.mark.parametrize("damage", ["truncated", "not_safetensors", "encoder_not_utf8", "rows_outside"])
def test_damaged_features_are_one_line(tmp_path, damage):
    root = tmp_path / "features"
    root.mkdir()
    save_file({"features": torch.zeros(2, 3, 4)}, str(root / "features.safetensors"))
    (root / "encoder.json").write_text("{}")
    write_parquet(pd.DataFrame({"row": [0, 1], "image_id": [7, 9]}), root / "images.parquet")
    blob = (root / "features.safetensors").read_bytes()
    if damage == "truncated":
        (root / "features.safetensors").write_bytes(blob[: len(blob) // 2])
    elif damage == "not_safetensors":
        (root / "features.safetensors").write_bytes(b"\x00" * 64)
    elif damage == "encoder_not_utf8":
        (root / "encoder.json").write_bytes(b'{"a": "caf\xe9"}')
    else:
        write_parquet(pd.DataFrame({"row": [0, 5], "image_id": [7, 9]}), root / "images.parquet")
    with refuses(root):
        features(_features_params(root))


@pytest.mark.parametrize(
    "feats, rows, named",
    [
        (torch.zeros(2, 12), [0, 1], ["(images, positions, dim)", "(2, 12)"]),
        (torch.zeros(2, 3, 4, dtype=torch.int64), [0, 1], ["(images, positions, dim)", "floats", "(2, 3, 4)"]),
        (torch.zeros(2, 3, 4), [0, 2], ["images.parquet", "rows outside", "2 feature rows"]),  # one past the end
        (torch.zeros(2, 3, 4), [-1, 1], ["images.parquet", "rows outside", "2 feature rows"]),
        (torch.zeros(2, 3, 4), [0.0, 1.0], ["images.parquet", "'row'", "float64"]),
    ],
)
def test_features_of_the_wrong_shape_or_rows_are_one_line(tmp_path, feats, rows, named):
    root = tmp_path / "features"
    root.mkdir()
    save_file({"features": feats}, str(root / "features.safetensors"))
    (root / "encoder.json").write_text("{}")
    write_parquet(pd.DataFrame({"row": rows, "image_id": [7, 9]}), root / "images.parquet")
    with refuses(root, *named):
        features(_features_params(root))


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_features_holding_a_nan_or_inf_are_refused_naming_the_file(tmp_path, value):
    # such features made visual_train stop with "loss is nan ... lower visual_train.lr", far from the cause
    root = tmp_path / "features"
    root.mkdir()
    feats = torch.zeros(2, 3, 4)
    feats[1, 2, 3] = value
    save_file({"features": feats}, str(root / "features.safetensors"))
    (root / "encoder.json").write_text("{}")
    write_parquet(pd.DataFrame({"row": [0, 1], "image_id": [7, 9]}), root / "images.parquet")
    with refuses(root / "features.safetensors", "non-finite"):
        features(_features_params(root))


def test_features_of_one_image_and_of_the_last_row_are_read(tmp_path):
    root = tmp_path / "features"
    root.mkdir()
    feats = torch.arange(24.0).reshape(2, 3, 4)
    save_file({"features": feats}, str(root / "features.safetensors"))
    (root / "encoder.json").write_text('{"encoder_id": "e"}')
    write_parquet(pd.DataFrame({"row": [1], "image_id": [9]}), root / "images.parquet")  # min = max = the last row
    got, image_row, record = features(_features_params(root))
    assert torch.equal(got, feats) and image_row == {9: 1} and record == {"encoder_id": "e"}


def test_a_truncated_cache_entry_is_encoded_again(tmp_path):
    from test_dino_features import save_tiny

    tiny = save_tiny(tmp_path / "tiny", seed=0)
    enc, p, cache = load_encoder(params(tiny), "cpu"), params(tiny), tmp_path / "cache"
    paths = images(tmp_path / "imgs", 2)
    first, _ = encode_images(paths, p, enc, cache)
    entry = sorted(next(cache.iterdir()).glob("*.safetensors"))[0]
    entry.write_bytes(entry.read_bytes()[:40])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again, info = encode_images(paths, p, enc, cache)
    (warned,) = (str(w.message) for w in caught if str(entry) in str(w.message))
    assert_names(warned, "unreadable")
    assert (info["n_encoded"], info["n_cached"]) == (1, 1) and torch.equal(again, first)
    assert len(entry.read_bytes()) > 40  # overwritten with a whole entry


@pytest.mark.parametrize("reader, suffix", [(cha_files, ".cha"), (read_text_documents, ".txt")])
def test_a_link_out_of_the_corpus_folder_is_refused(tmp_path, reader, suffix):
    secret = tmp_path / "outside" / f"secret{suffix}"
    secret.parent.mkdir()
    secret.write_text("@UTF8\n@Begin\n@End\n" if suffix == ".cha" else "a story.")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / f"own{suffix}").write_text(secret.read_text())
    (corpus / f"link{suffix}").symlink_to(secret)
    with refuses(corpus / f"link{suffix}", secret, f"outside {corpus}"):
        reader(corpus)
    (corpus / f"link{suffix}").unlink()
    (corpus / f"inner{suffix}").symlink_to(corpus / f"own{suffix}")  # a link that stays inside is fine
    assert reader(corpus)
