"""Visual-dialogue grounding data and gain on tiny dialogs and a tiny prefix model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import refuses

from emergence.core.models.registry import build_model
from emergence.studies.grounding.gain import target_surprisal
from emergence.studies.grounding.visual_data import dialog_sequences, image_batches, other_images, without_env
from emergence.studies.grounding.visual_gain import image_gain_rows, image_pairs

pytestmark = pytest.mark.usefixtures("one_thread")

DIALOGS = pd.DataFrame(
    {
        "image_id": [10, 11, 12, 13],
        "env": [["a<ENV>", "dog<ENV>"], ["a<ENV>", "cat<ENV>"], ["a<ENV>", "cup<ENV>"], ["a<ENV>", "dog<ENV>"]],
        "tokens": [
            ["a<ENV>", "dog<ENV>", "<Q>", "is<LAN>", "dog<LAN>"],
            ["a<ENV>", "cat<ENV>", "<Q>", "cat<LAN>"],
            ["a<ENV>", "cup<ENV>", "<Q>", "cup<LAN>", "<A>", "yes<LAN>"],
            ["a<ENV>", "dog<ENV>", "<Q>", "dog<LAN>"],
        ],
    }
)
VOCAB = [
    "<unk>",
    "<Q>",
    "<A>",
    "a<ENV>",
    "dog<ENV>",
    "cat<ENV>",
    "cup<ENV>",
    "is<LAN>",
    "dog<LAN>",
    "cat<LAN>",
    "cup<LAN>",
    "yes<LAN>",
]
INDEX = {t: i for i, t in enumerate(VOCAB)}


def test_image_setting_drops_the_caption():
    assert without_env(DIALOGS["tokens"][0], len(DIALOGS["env"][0])) == ["<Q>", "is<LAN>", "dog<LAN>"]


def test_other_images_never_show_the_target_or_the_own_image():
    eval_set = pd.DataFrame({"turn": [0, 3], "word": ["dog", "dog"]})
    picks = other_images(DIALOGS, eval_set, 2, seed=0)
    assert all(sorted(p) == [11, 12] for p in picks)  # 10 and 13 have dog in their captions
    with refuses("visual_eval.n_mismatched", "only 2", "'dog'", "got 3"):
        other_images(DIALOGS, eval_set, 3, seed=0)


def test_dialog_sequences_pad_with_minus_one_and_skip_held_out():
    ids, images = dialog_sequences(DIALOGS, {1}, INDEX, seq_len=4)
    assert images.tolist() == [10, 12, 13]
    assert ids[0].tolist() == [INDEX["<Q>"], INDEX["is<LAN>"], INDEX["dog<LAN>"], -1, -1]
    assert ids[1].tolist() == [1, INDEX["cup<LAN>"], 2, INDEX["yes<LAN>"], -1]


def test_dialog_sequences_cut_at_seq_len_plus_one_and_keep_integer_image_ids():
    ids, images = dialog_sequences(DIALOGS, set(), INDEX, seq_len=2)
    assert ids[2].tolist() == [INDEX["<Q>"], INDEX["cup<LAN>"], INDEX["<A>"]]  # 4 tokens after the caption, 3 kept
    assert ids.dtype == np.int64 and images.dtype == np.int64  # image ids index the feature rows
    with refuses("visual_train", "held out"):
        dialog_sequences(DIALOGS, {0, 1, 2, 3}, INDEX, seq_len=2)


def test_other_images_are_a_pure_function_of_the_seed():
    many = pd.DataFrame({"image_id": range(20, 32), "env": [["a<ENV>"]] * 12, "tokens": [["a<ENV>"]] * 12})
    eval_set = pd.DataFrame({"turn": [0, 1, 2], "word": ["dog", "dog", "dog"]})
    picks = other_images(many, eval_set, 3, seed=5)
    assert picks == other_images(many, eval_set, 3, seed=5)
    assert picks != other_images(many, eval_set, 3, seed=6)
    assert all(len(set(p)) == 3 and 20 + turn not in p for p, turn in zip(picks, eval_set["turn"]))


def test_image_batches_pair_each_dialog_with_its_image_and_are_pure_in_step():
    ids, _ = dialog_sequences(DIALOGS, set(), INDEX, seq_len=4)
    features = torch.arange(4.0)[:, None, None].expand(4, 2, 3)  # image row r has features == r
    batch_fn = image_batches(ids, np.array([0, 1, 2, 3]), features, batch_size=2, seed=0)
    inputs, targets = batch_fn(5)
    again, _ = batch_fn(5)
    assert torch.equal(inputs["idx"], again["idx"]) and inputs["prefix"].shape == (2, 2, 3)
    rows = inputs["prefix"][:, 0, 0].long()
    assert torch.equal(inputs["idx"], torch.from_numpy(ids[rows.numpy(), :-1]).clamp(min=0))
    assert torch.equal(targets, torch.from_numpy(ids[rows.numpy(), 1:]))


def test_image_gain_compares_the_own_image_with_the_others():
    torch.manual_seed(0)
    model = build_model(
        "transformer",
        dict(
            n_layers=1,
            d_model=16,
            n_heads=2,
            d_head=8,
            d_mlp=32,
            n_ctx=12,
            d_vocab=len(VOCAB),
            d_prefix=3,
            pos="learned",
        ),
    ).eval()
    features = torch.randn(4, 2, 3, generator=torch.Generator().manual_seed(1))
    image_row = {10: 0, 11: 1, 12: 2, 13: 3}
    eval_set = pd.DataFrame(
        {"word": ["dog"], "image_context": [["<Q>", "is<LAN>"]], "image_id": [10], "other_images": [[11, 12]]}
    )
    pairs, rows = image_pairs(eval_set, INDEX, image_row)
    assert rows.tolist() == [0, 1, 2] and pairs.matched.tolist() == [True, False, False]
    table = image_gain_rows(model, eval_set, INDEX, features, image_row)
    s = [target_surprisal(model, [[1, 7]], [INDEX["dog<LAN>"]], prefixes=features[r : r + 1])[0] for r in (0, 1, 2)]
    assert table.loc[0, "s_matched"] == pytest.approx(s[0], abs=1e-5)
    assert table.loc[0, "gain"] == pytest.approx((s[1] + s[2]) / 2 - s[0], abs=1e-5)
    with refuses("image_id 99"):
        image_pairs(eval_set.assign(other_images=[[99]]), INDEX, image_row)
    # no context: no pairs, and index arrays that still index (integers and booleans, not empty floats)
    pairs, rows = image_pairs(eval_set.iloc[:0], INDEX, image_row)
    assert (pairs.rows.dtype, pairs.matched.dtype, rows.dtype) == (np.int64, np.bool_, np.int64)
