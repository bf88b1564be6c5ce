"""What each association analysis stage feeds its analysis: the run (layers, seed), its checkpoints, the
training config the run recorded, the corpus's sequences, the closed-form basis; and the order stage's own
short run (`order_run`), against full-batch SGD from zero written out step by step.

The upstream stages build the tiny corpus and its basis; runs of both layer counts and two seeds hold
checkpoints of distinct weights, whose recorded batch size and learning rate differ from params'."""

from __future__ import annotations

import importlib
import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from feeds import ran, save_run, spy, spy_listing, step_of, workspace
from refusals import refuses

from emergence.core.io import write_parquet
from emergence.core.models.registry import build_model
from emergence.core.train.batches import epoch_rows
from emergence.studies.assoc.compare import first_batch_rows
from emergence.studies.assoc.compare_params import CompareParams
from emergence.studies.assoc.corpus import load_corpus
from emergence.studies.assoc.theory import compute_basis, leading_coefficient, load_basis
from stages.assoc import causal, compare, order
from stages.assoc import train as assoc_train

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


def test_compare_keeps_a_checkpoint_whose_loss_was_not_logged(project, monkeypatch, capsys):
    # metrics.parquet without step 5 and with no finite loss at step 11: both checkpoints keep their cosine
    # rows, with no loss beside them
    edit, _, _ = project
    edit()
    logged = pd.DataFrame({"step": [0, 1, 2, 11], "corpus_loss": [0.0, 1.0, 2.0, float("nan")]})
    write_parquet(logged, f"data/assoc/runs/L2_seed{SEED}/metrics.parquet")
    monkeypatch.setattr(compare, "compute_basis", lambda *a, **k: "first batch basis")
    monkeypatch.setattr(compare, "cosine_table", lambda *a: pd.DataFrame({"step": STEPS, "cos": 0.5}))
    ran(compare.main, ARGV, capsys)
    table = pd.read_parquet(f"data/assoc/cosines/L2_seed{SEED}.parquet")
    assert table["step"].tolist() == STEPS
    assert table["corpus_loss"].tolist()[:3] == [0.0, 1.0, 2.0] and table["corpus_loss"].iloc[3:].isna().all()


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
    assert pd.read_parquet("data/assoc/order.parquet")["eta"].tolist() == [0.01, 0.02, 0.04]  # eta by eta, up


def test_train_runs_sgd_from_zero_on_the_seeds_shuffle_of_the_corpus(project, monkeypatch, capsys):
    edit, _, corpus = project
    edit(assoc_train={"batch_size": 5, "epochs": 2})
    train = spy(monkeypatch, assoc_train, "train", lambda model, batch_fn, cfg, **kw: [batch_fn(0), batch_fn(1)])
    ran(assoc_train.main, ARGV, capsys)
    (model, _, cfg), kw = train.one
    per_epoch = len(corpus.sequences) // 5  # the remainder sits each epoch out
    assert (cfg.seed, cfg.batch_size, cfg.steps, cfg.lr) == (SEED, 5, 2 * per_epoch, 0.05)
    assert len(model.blocks) == 2 and all(not w.any() for w in model.parameters())
    assert Path(kw["out_dir"]) == Path(f"data/assoc/runs/L2_seed{SEED}")
    rows = epoch_rows(len(corpus.sequences), 5, SEED)
    for step, (x, y) in enumerate(train.returned[0]):
        block = torch.from_numpy(corpus.sequences[rows(step)].astype(np.int64))
        assert torch.equal(x, block[:, :-1]) and torch.equal(y, block[:, 1:])
    # the loss it logs is over the whole corpus, every position alike, not over a batch
    torch.manual_seed(0)
    with torch.no_grad():
        for w in model.parameters():
            w.normal_()
        x, y = torch.from_numpy(corpus.sequences[:, :-1]).long(), torch.from_numpy(corpus.sequences[:, 1:]).long()
        by_hand = -model(x)[0].double().log_softmax(-1).gather(-1, y[..., None]).mean().item()
    assert kw["eval_fn"](model, 0) == {"corpus_loss": pytest.approx(by_hand, rel=1e-6)}


# order_run on a corpus of its own: 9 sequences of 8 tokens drawn from 0..5 under a vocabulary of 7 (the last
# token never occurs, so the model's width is the basis's, not the corpus's), two layers, and a learning rate
# at which the gradient's norm passes 1 by the last update (where a clip at 1 would bite).
ORDER_V, ORDER_LAYERS, ORDER_ETA, ORDER_STEPS = 7, 2, 12.0, 5


@pytest.fixture(scope="module")
def order_ran(tmp_path_factory, one_thread):
    """(sequences, basis, the rows order_run returned, its work folder)."""
    sequences = np.random.default_rng(0).integers(0, ORDER_V - 1, (9, 8))
    basis = compute_basis(sequences, ORDER_V)
    work = tmp_path_factory.mktemp("order_work")
    rows = order.order_run(sequences, basis, ORDER_LAYERS, ORDER_ETA, ORDER_STEPS, work)
    return sequences, basis, rows, work


def sgd_weights(sequences: np.ndarray) -> tuple[list[dict[str, torch.Tensor]], list[float]]:
    """The weights after each of ORDER_STEPS plain full-batch SGD steps from zero (float64, next-token loss
    over every position of every sequence), and each update's gradient norm."""
    model = build_model(
        "attn_only", dict(n_layers=ORDER_LAYERS, d_vocab=ORDER_V, n_ctx=sequences.shape[1] - 1, dtype="float64")
    )
    x, y = torch.from_numpy(sequences[:, :-1]), torch.from_numpy(sequences[:, 1:])
    after, norms = [], []
    for _ in range(ORDER_STEPS):
        model.zero_grad()
        model(x, y)[1].backward()
        norms.append(float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm()))
        with torch.no_grad():
            for p in model.parameters():
                p -= ORDER_ETA * p.grad
        after.append({name: p.detach().clone() for name, p in model.named_parameters()})
    return after, norms


def test_order_run_reads_every_step_of_full_batch_sgd_from_zero_against_the_leading_order(order_ran):
    sequences, basis, rows, _ = order_ran
    after, norms = sgd_weights(sequences)
    assert max(norms) > 1.05  # an update a clip at norm 1 would shrink
    theory = {"W_O": basis.B, "V": (basis.B @ basis.Phi).T, "W": basis.Q, "P": basis.Delta}
    want = []
    for step, weights in enumerate(after, start=1):
        learned = {(layer, w): weights[f"blocks.{layer}.attn.{w}"] for layer in range(ORDER_LAYERS) for w in "WVP"}
        learned[(-1, "W_O")] = weights["W_O"]
        for (layer, w), a in learned.items():
            t, coef = theory[w], leading_coefficient(w, step, ORDER_ETA)
            cos = float((a * t).sum() / (a.norm() * t.norm())) if a.norm() > 0 else float("nan")
            error = float((a - coef * t).norm() / (coef * t).norm()) if coef else float("nan")
            want.append(dict(step=step, layer=layer, weight=w, cosine=cos, rel_error=error, norm=float(a.norm())))
    # step by step from 1 (step 0's zero weights have no row), the layers in order and W_O last
    assert [(r["step"], r["layer"], r["weight"]) for r in rows] == [(r["step"], r["layer"], r["weight"]) for r in want]
    assert all(list(r) == ["eta", "step", "layer", "weight", "cosine", "rel_error", "norm"] for r in rows)
    got, expected = pd.DataFrame(rows), pd.DataFrame(want)
    assert (got["eta"] == ORDER_ETA).all()
    for column in ("cosine", "rel_error", "norm"):
        np.testing.assert_allclose(got[column], expected[column], rtol=1e-9, atol=0, err_msg=column)
    # W and P are exactly zero before step 3, V before step 2: their cosines are undefined there
    assert got["cosine"].isna().tolist() == [r["step"] < {"W": 3, "P": 3, "V": 2, "W_O": 1}[r["weight"]] for r in want]


def test_order_run_checkpoints_record_a_float64_model_of_the_basis_width_and_unclipped_full_batch_cpu_sgd(order_ran):
    sequences, _, _, work = order_ran
    configs = [json.loads(p.read_text()) for p in sorted(work.rglob("config.json"))]
    assert sorted(c["step"] for c in configs) == list(range(ORDER_STEPS + 1))  # every step, 0 included
    for c in configs:
        assert (c["arch"], c["config"]) == ("attn_only", dict(n_layers=2, d_vocab=7, n_ctx=7, dtype="float64"))
        train = c["meta"]["train"]
        assert (train["steps"], train["batch_size"], train["lr"]) == (ORDER_STEPS, len(sequences), ORDER_ETA)
        assert (train["optimizer"], train["momentum"], train["weight_decay"]) == ("sgd", 0.0, 0.0)
        assert (train["schedule"], train["warmup_steps"], train["grad_clip"]) == ("constant", 0, None)
        assert train["device"] == "cpu"  # the float64 run stays on the CPU, whatever accelerator the machine has
        assert (train["dense_until"], train["n_log_checkpoints"]) == (ORDER_STEPS, 0)  # every step, none log-spaced


class Terminal(io.StringIO):
    """A stderr that says it is a terminal: where a progress bar would be drawn."""

    def isatty(self) -> bool:
        return True


def test_order_run_draws_no_progress_bar_even_on_a_terminal(tmp_path, monkeypatch, one_thread):
    sequences = np.random.default_rng(1).integers(0, ORDER_V - 1, (9, 8))
    monkeypatch.setattr(sys, "stderr", Terminal())
    rows = order.order_run(sequences, compute_basis(sequences, ORDER_V), 1, 0.5, 3, tmp_path)
    assert sorted({r["step"] for r in rows}) == [1, 2, 3]
    assert sys.stderr.getvalue() == ""  # one short run per eta: silent, whatever the stage's own output


def test_order_run_that_diverges_names_the_assoc_order_section_and_keeps_its_state_in_the_work_folder(
    order_ran, tmp_path, one_thread
):
    sequences, basis, _, _ = order_ran
    # at this rate the loss is finite for 4 steps and nan at the 5th: a resume state of step 3 exists
    with refuses("assoc_order.lr", "step 4", tmp_path / "scratch") as caught:
        order.order_run(sequences, basis, ORDER_LAYERS, 1e6, ORDER_STEPS, tmp_path)
    assert str(caught.value).startswith("assoc_order: ")
    assert (tmp_path / "scratch").is_dir() and any((tmp_path / "scratch").iterdir())
    assert not (tmp_path / "run").exists()  # nothing published
