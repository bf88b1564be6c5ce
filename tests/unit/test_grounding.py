"""Study G's token data and grounding gain on tiny turns and a tiny model."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import refuses

from emergence.core.models.registry import build_model
from emergence.interp import padding
from emergence.interp.padding import right_pad
from emergence.studies.grounding.gain import gain_rows, sign_flip_test, target_surprisal, word_gains
from emergence.studies.grounding.tokens import (
    build_vocab,
    evaluation_turns,
    mismatched,
    select_targets,
    token_counts,
    training_windows,
)

TURNS = pd.DataFrame(
    {
        "file": ["a.cha"] * 4 + ["b.cha"] * 2,
        "tokens": [
            ["<MOT>", "ball<ENV>", "look<LAN>", "the<LAN>", "ball<LAN>"],
            ["<CHI>", "ball<LAN>"],  # named, but not in the environment
            ["<MOT>", "picks<ENV>", "cup<ENV>", "a<LAN>", "cup<LAN>", "cup<LAN>"],
            ["<CHI>", "dog<ENV>", "more<LAN>"],
            ["<MOT>", "dog<ENV>", "dog<LAN>"],
            ["<MOT>", "cup<LAN>", "cup<ENV>"],  # ENV after the LAN: not a context
        ],
    }
)


def test_targets_need_both_forms_and_say_how_many_passed():
    counts = token_counts(TURNS["tokens"])
    assert select_targets(counts, ["dog", "ball", "cup", "cat"], 2, 1) == ["cup", "ball"]  # cup: min(2, 3)
    with refuses("grounding_vocab.n_words: ", "3 of the 4", "min_count=1"):  # how many passed, of how many
        select_targets(counts, ["dog", "ball", "cup", "cat"], 4, 1)


def test_vocab_is_deterministic_and_keeps_target_forms():
    counts = Counter({"a": 5, "b": 5, "rare": 1, "x<ENV>": 1, "x<LAN>": 1})
    vocab = build_vocab(counts, ["x"], min_token_count=2)
    assert vocab == ["<unk>", "a", "b", "x<ENV>", "x<LAN>"]


def test_evaluation_contexts_stop_before_the_first_named_target():
    table = evaluation_turns(TURNS, ["ball", "cup", "dog"], max_per_word=5, seed=0)
    assert table["turn"].tolist() == [0, 2, 4]
    assert table.loc[0, "context"] == ["<MOT>", "ball<ENV>", "look<LAN>", "the<LAN>"]
    assert table.loc[1, "context"] == ["<MOT>", "picks<ENV>", "cup<ENV>", "a<LAN>"]
    assert mismatched(table.loc[0, "context"], "ball", "dog")[1] == "dog<ENV>"


def test_evaluation_contexts_come_in_word_order_and_none_is_an_empty_table():
    hat_first = pd.DataFrame({"tokens": [["hat<ENV>", "hat<LAN>"], ["ball<ENV>", "ball<LAN>"]]}, index=[7, 3])
    table = evaluation_turns(hat_first, ["hat", "ball"], max_per_word=5, seed=0)
    assert table[["turn", "word"]].values.tolist() == [[3, "ball"], [7, "hat"]]
    none = evaluation_turns(hat_first, ["cup"], max_per_word=5, seed=0)
    assert none.empty and list(none.columns) == ["turn", "word", "context"]


def test_training_windows_leave_out_the_held_out_turns():
    index = {t: i for i, t in enumerate(build_vocab(token_counts(TURNS["tokens"]), [], 1))}
    windows = training_windows(TURNS, {0, 2}, index, seq_len=3, key="k.seq_len")
    assert windows.shape == (2, 4)  # a.cha keeps 2 + 3 = 5 tokens -> one window; b.cha 6 -> one
    assert index["look<LAN>"] not in windows
    longest = max(len([t for toks in g["tokens"] for t in toks]) for _, g in TURNS.groupby("file"))
    with refuses("k.seq_len: 50", "51 tokens", f"has {longest})"):  # the key to lower, and the longest file's
        training_windows(TURNS, set(), index, seq_len=50, key="k.seq_len")


def test_training_windows_come_in_file_name_order():
    index = {t: i for i, t in enumerate(build_vocab(token_counts(TURNS["tokens"]), [], 1))}
    b_first = pd.concat([TURNS.iloc[4:], TURNS.iloc[:4]])  # b.cha's turns first, their index kept
    windows = training_windows(b_first, {0, 2}, index, 3, "k")
    assert np.array_equal(windows, training_windows(TURNS, {0, 2}, index, 3, "k"))
    first_a = [index[t] for t in ["<CHI>", "ball<LAN>", "<CHI>", "dog<ENV>"]]  # turns 1 and 3 (0, 2 held out)
    assert windows[0].tolist() == first_a


class Lookup(torch.nn.Module):
    """Logits depend only on the current token: a fixed table, so surprisals are known."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = torch.nn.Parameter(table)

    def forward(self, idx, targets=None):
        return self.table[idx], None


def test_target_surprisal_reads_after_the_last_real_token():
    table = torch.log_softmax(torch.randn(5, 5, generator=torch.Generator().manual_seed(0)), -1)
    model = Lookup(table)
    s = target_surprisal(model, [[1, 2], [3], [4, 0, 1]], [0, 2, 3], batch_size=2)
    assert np.allclose(s, [-table[2, 0], -table[3, 2], -table[1, 3]], atol=1e-6)


def test_gain_is_positive_when_env_predicts_lan():
    vocab = ["<unk>", "<MOT>", "ball<ENV>", "cup<ENV>", "the<LAN>", "ball<LAN>", "cup<LAN>"]
    index = {t: i for i, t in enumerate(vocab)}
    eval_set = pd.DataFrame({"word": ["ball"], "context": [["<MOT>", "ball<ENV>"]], "others": [["cup"]]})
    table = torch.zeros(len(vocab), len(vocab))
    table[index["ball<ENV>"], index["ball<LAN>"]] = 3.0  # seeing ball<ENV> predicts ball<LAN>
    rows = gain_rows(Lookup(table), eval_set, index)
    assert rows.loc[0, "gain"] == pytest.approx(rows.loc[0, "s_mismatched"] - rows.loc[0, "s_matched"])
    assert rows.loc[0, "gain"] == pytest.approx(np.log(7) + np.log(np.exp(3) / (np.exp(3) + 6)), abs=1e-5)
    rows = rows.assign(model="x", seed=0, step=0)
    assert word_gains(rows)["gain"].item() == pytest.approx(rows.loc[0, "gain"])


def test_sign_flip_test_separates_shift_from_noise():
    rng = np.random.default_rng(0)
    assert sign_flip_test(rng.normal(1.0, 0.5, 20)) < 0.01
    assert sign_flip_test(rng.normal(0.0, 0.5, 20)) > 0.01
    assert sign_flip_test(-np.ones(10)) > 0.99


def test_right_pad_pads_with_zero_on_the_device_asked_for(monkeypatch):
    idx, lengths = right_pad([[3, 1, 4], [5], [9, 2]])
    assert idx.tolist() == [[3, 1, 4], [5, 0, 0], [9, 2, 0]] and lengths.tolist() == [3, 1, 2]
    assert idx.dtype == torch.long

    class Torch:  # records the device each tensor is made on (a CPU-only machine has no other device)
        def __getattr__(self, name):
            return getattr(torch, name)

        def tensor(self, data, **kw):
            made.append(("tensor", kw.get("device")))
            return torch.tensor(data)

        def zeros(self, *size, **kw):
            made.append(("zeros", kw.get("device")))
            return torch.zeros(*size, dtype=kw["dtype"])

    made = []
    monkeypatch.setattr(padding, "torch", Torch())
    padding.right_pad([[3, 1, 4], [5]], "cuda:1")
    assert made == [("tensor", "cuda:1"), ("zeros", "cuda:1"), ("tensor", "cuda:1"), ("tensor", "cuda:1")]


def test_zoo_models_are_causal_under_right_padding():
    model = build_model(
        "transformer", dict(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32, n_ctx=8, d_vocab=7)
    ).eval()
    alone = target_surprisal(model, [[1, 2, 3]], [4])
    padded = target_surprisal(model, [[1, 2, 3], [1, 2, 3, 5, 6, 1]], [4, 4])
    assert alone[0] == pytest.approx(padded[0], abs=1e-5)
