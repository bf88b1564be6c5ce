"""What each association analysis stage feeds its analysis: the run (layers, seed), its checkpoints, the
training config the run recorded, the corpus's sequences, the closed-form basis.

The upstream stages build the tiny corpus and its basis; runs of both layer counts and two seeds hold
checkpoints of distinct weights, whose recorded batch size and learning rate differ from params'."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from feeds import ran, save_run, spy, spy_listing, step_of, workspace

from emergence.core.io import write_parquet
from emergence.studies.assoc.compare import CompareParams, first_batch_rows
from emergence.studies.assoc.corpus import load_corpus
from emergence.studies.assoc.theory import load_basis
from stages.assoc import causal, compare, order

SEED = 3
EDITS = {"assoc_runs": {"seeds": [0, SEED]}}
STEPS = [0, 1, 2, 5, 11]
TRAIN = {"batch_size": 5, "lr": 0.07, "checkpoint_every": 3}  # as the run recorded it (params: full batch, 0.05)
ARGV = ["--layers", "2", "--seed", str(SEED)]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The tiny corpus and basis, and runs L1_seed3, L2_seed0, L2_seed3 (the one the tests ask for)."""
    root = tmp_path_factory.mktemp("assoc")
    with pytest.MonkeyPatch.context() as mp:
        workspace(root, mp, EDITS)
        for name in ("stories", "corpus", "basis"):
            assert importlib.import_module(f"stages.assoc.{name}").main([]) == 0, name
    corpus = load_corpus(root / "data/assoc/corpus.safetensors")
    for run in ("L1_seed3", "L2_seed0", "L2_seed3"):
        config = {"n_layers": int(run[1]), "d_vocab": len(corpus.vocab), "n_ctx": corpus.seq_len}
        save_run(root / "data/assoc/runs" / run, STEPS, "attn_only", config, {"train": TRAIN})
        metrics = pd.DataFrame({"step": STEPS, "corpus_loss": [float(s) for s in STEPS]})
        write_parquet(metrics, root / "data/assoc/runs" / run / "metrics.parquet")
    return root


@pytest.fixture
def project(built, tmp_path, monkeypatch):
    """A working directory holding the built data; returns (params writer, checkpoints of L2_seed3, corpus)."""
    shutil.copytree(built / "data", tmp_path / "data")
    ckpts = {step: Path(f"data/assoc/runs/L2_seed{SEED}/step{step}") for step in STEPS}
    edit = lambda **edits: workspace(tmp_path, monkeypatch, {**EDITS, **edits})  # noqa: E731
    return edit, ckpts, load_corpus(tmp_path / "data/assoc/corpus.safetensors")


def test_compare_reads_every_checkpoint_against_the_corpus_and_first_batch_bases(project, monkeypatch, capsys):
    edit, ckpts, corpus = project
    params = edit()
    basis = spy(monkeypatch, compare, "compute_basis", lambda *a, **k: "first batch basis")
    cosines = spy_listing(monkeypatch, compare, "cosine_table", lambda *a: pd.DataFrame({"step": STEPS, "cos": 0.5}))
    ran(compare.main, ARGV, capsys)
    (models, bases, eta, per_epoch, window, log_every), _ = cosines.one
    assert [s for s, _ in models] == STEPS and all(step_of(m, ckpts) == [s] for s, m in models)
    assert len(corpus.sequences) % TRAIN["batch_size"]  # the epoch's remainder sits out: per_epoch rounds down
    # the run's own training config, not params'
    assert (eta, per_epoch, log_every) == (0.07, len(corpus.sequences) // 5, 3)
    assert window == params["assoc_compare"]["window_epochs"]
    want = load_basis("data/assoc/basis.safetensors")
    assert set(bases) == {"corpus", "first_batch"} and bases["first_batch"] == "first batch basis"
    assert all(np.array_equal(getattr(bases["corpus"], k), getattr(want, k)) for k in ("B", "Phi", "Q", "Delta"))
    # the first batch of this seed's shuffle, at the run's batch size
    rows, q_rows = first_batch_rows(len(corpus.sequences), 5, CompareParams(), SEED)
    (seqs, vocab), kw = basis.one
    assert len(rows) == 5 and np.array_equal(seqs, corpus.sequences[rows]) and vocab == len(corpus.vocab)
    assert np.array_equal(kw["q_sequences"], corpus.sequences[q_rows])
    table = pd.read_parquet(f"data/assoc/cosines/L2_seed{SEED}.parquet")
    assert table["corpus_loss"].tolist() == [float(s) for s in STEPS]  # the run's own logged losses


def test_causal_measures_the_named_checkpoint_on_the_first_sequences(project, monkeypatch, capsys):
    edit, ckpts, corpus = project
    edit(assoc_causal={"checkpoint": "step2", "n_sequences": 7})
    analysis = spy(monkeypatch, causal, "causal_table", lambda *a: pd.DataFrame({"weight": ["none"], "loss": [1.0]}))
    ran(causal.main, ARGV, capsys)
    (model, basis, sequences), _ = analysis.one
    assert step_of(model, ckpts) == [2] and np.array_equal(sequences, corpus.sequences[:7])
    want = load_basis("data/assoc/basis.safetensors")
    assert all(np.array_equal(getattr(basis, k), getattr(want, k)) for k in ("B", "Phi", "Q", "Delta"))
    table = pd.read_parquet(f"data/assoc/causal/L2_seed{SEED}.parquet")
    assert table[["n_layers", "seed", "step"]].values.tolist() == [[2, SEED, 2]]


def test_order_trains_at_every_eta_on_the_corpus_prefix_and_its_own_basis(project, monkeypatch, capsys):
    edit, _, corpus = project
    edit(assoc_order={"n_layers": 1, "etas": [0.04, 0.01, 0.02], "steps": 6, "n_sequences": 9})
    basis = spy(monkeypatch, order, "compute_basis", lambda seqs, v: ("basis of", len(seqs)))
    runs = spy(monkeypatch, order, "order_run", lambda seqs, b, n, eta, steps, work: [{"step": steps, "eta": eta}])
    ran(order.main, [], capsys)
    (seqs, vocab), _ = basis.one
    assert np.array_equal(seqs, corpus.sequences[:9]) and vocab == len(corpus.vocab)
    assert sorted(args[3] for args, _ in runs.calls) == [0.01, 0.02, 0.04]
    for (seqs, got_basis, n_layers, _, steps, _), _ in runs.calls:
        assert np.array_equal(seqs, corpus.sequences[:9]) and got_basis is basis.returned[0]
        assert (n_layers, steps) == (1, 6)
    assert len({str(args[5]) for args, _ in runs.calls}) == 3  # a fresh work folder per eta
