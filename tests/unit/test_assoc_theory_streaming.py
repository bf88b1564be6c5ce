"""The closed forms' plumbing: chunks, devices, progress bars, and Q / Delta against explicit loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from refusals import refuses
from safetensors.torch import save_file

from emergence.studies.assoc import theory
from emergence.studies.assoc.theory import (
    attention_terms,
    bigram_and_context,
    chunk_rows,
    chunks,
    compute_basis,
    first_nonzero_step,
    leading_coefficient,
    load_basis,
    uniform_causal,
)

V, T = 5, 4
# Rows differ, token V-1 = 4 is never an input (only a last token), and every row has repeats.
SEQ = np.array(
    [
        [0, 1, 2, 0, 4],
        [3, 3, 1, 0, 2],
        [2, 0, 0, 1, 1],
        [1, 2, 3, 2, 4],
    ],
    dtype=np.int32,
)
# G with rows far from zero mean (the G of compute_basis has zero row means), so centring shows.
G = (
    torch.tensor(
        [[3.0, 1, 0, 2, 5], [0, 4, 1, 1, 2], [2, 2, 7, 0, 1], [1, 0, 3, 6, 0], [4, 1, 1, 1, 9]], dtype=torch.float64
    )
    / 3
)


class Seen(Exception):
    """Raised by a spy to stop a computation once it has seen what the test reads."""


def reference_q_delta(seq: np.ndarray, G: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q and Delta by explicit loops over positions: R = Y - 1/V, C = R G^T X^T, D = A0 * (C - rowmean)."""
    Vg = G.shape[0]
    N, T1 = seq.shape
    Tn = T1 - 1
    Q = torch.zeros(Vg, Vg, dtype=torch.float64)
    Delta = torch.zeros(Tn, dtype=torch.float64)
    for row in seq:
        x, y = row[:-1], row[1:]
        R = torch.full((Tn, Vg), -1 / Vg, dtype=torch.float64)
        for t in range(Tn):
            R[t, y[t]] += 1
        for t in range(Tn):
            C = [float(sum(R[t, a] * G[x[k], a] for a in range(Vg))) for k in range(t + 1)]
            mean = sum(C) / (t + 1)  # the A0-weighted row mean: A0[t, k] = 1 / (t + 1)
            for k in range(t + 1):
                d = (C[k] - mean) / (t + 1)
                Q[x[t], x[k]] += d
                Delta[t - k] += d
    return Q / (N * Tn), Delta / (N * Tn)


def reference_b_phi(seq: np.ndarray, Vn: int) -> tuple[torch.Tensor, torch.Tensor]:
    """B = mean X^T R and Phi = mean R^T A0 X by loops over positions."""
    N, T1 = seq.shape
    Tn = T1 - 1
    B = torch.zeros(Vn, Vn, dtype=torch.float64)
    Phi = torch.zeros(Vn, Vn, dtype=torch.float64)
    for row in seq:
        x, y = row[:-1], row[1:]
        for t in range(Tn):
            for v in range(Vn):
                r = (v == y[t]) - 1 / Vn
                B[x[t], v] += r
                for k in range(t + 1):
                    Phi[v, x[k]] += r / (t + 1)
    return B / (N * Tn), Phi / (N * Tn)


def test_unknown_weight_names_the_known_ones():
    with refuses("'K'", "W, V, W_O, P", error=ValueError):
        leading_coefficient("K", 3, 0.1)


def test_first_nonzero_step_is_where_the_leading_coefficient_starts():
    assert {w: first_nonzero_step(w) for w in ("W_O", "V", "W", "P")} == {"W_O": 1, "V": 2, "W": 3, "P": 3}
    for w in ("W_O", "V", "W", "P"):
        s = first_nonzero_step(w)
        assert leading_coefficient(w, s - 1, 0.5) == 0 < leading_coefficient(w, s, 0.5)


def test_chunks_are_int64_inputs_and_next_tokens_on_the_device():
    got = list(chunks(SEQ, 3))  # the int32 corpus, default device
    assert [tuple(x.shape) for x, _ in got] == [(3, 4), (1, 4)]
    assert all(x.dtype == torch.int64 and y.dtype == torch.int64 for x, y in got)
    assert all(x.device.type == "cpu" for x, _ in got)
    assert torch.equal(got[1][0], torch.tensor([[1, 2, 3, 2]])) and torch.equal(got[1][1], torch.tensor([[2, 3, 2, 4]]))
    assert torch.equal(got[0][1][1], torch.tensor([3, 1, 0, 2]))
    x, y = next(chunks(SEQ, 2, "meta"))
    assert x.device.type == "meta" and y.device.type == "meta"


def test_uniform_causal_by_hand():
    A0 = uniform_causal(3)
    assert A0.dtype == torch.float64 and A0.device.type == "cpu"
    assert torch.equal(A0, torch.tensor([[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]], dtype=torch.float64))


def test_chunk_rows_keeps_at_least_one_sequence():
    assert chunk_rows(4) == (1 << 22) // 16
    assert chunk_rows(2048) == 1  # exactly the budget
    assert chunk_rows(2049) == 1  # over the budget: still one sequence per chunk
    assert chunk_rows(10, budget=250) == 2


def test_bigram_and_context_by_loops_over_positions():
    B, Phi = bigram_and_context(SEQ, V, rows=3)
    rB, rPhi = reference_b_phi(SEQ, V)
    assert B.shape == Phi.shape == (V, V)
    assert torch.allclose(B, rB, rtol=0, atol=1e-15) and torch.allclose(Phi, rPhi, rtol=0, atol=1e-15)


def test_attention_terms_by_loops_over_positions():
    Q, Delta = attention_terms(SEQ, G, rows=3)
    rQ, rDelta = reference_q_delta(SEQ, G)
    assert Q.dtype == Delta.dtype == torch.float64 and Delta.shape == (T,)
    assert torch.allclose(Q, rQ, rtol=0, atol=1e-15) and torch.allclose(Delta, rDelta, rtol=0, atol=1e-15)
    assert Delta.abs().min() > 1e-4  # every offset holds something: a dropped or shifted one shows


def test_compute_basis_returns_every_closed_form():
    basis = compute_basis(SEQ, V)
    B, Phi = reference_b_phi(SEQ, V)
    assert torch.allclose(basis.B, B, rtol=0, atol=1e-15) and torch.allclose(basis.Phi, Phi, rtol=0, atol=1e-15)
    assert torch.equal(basis.Sigma_B, basis.B.T @ basis.B)
    assert torch.equal(basis.G, (basis.B @ basis.Phi).T @ basis.B)
    Q, Delta = reference_q_delta(SEQ, basis.G)
    assert torch.allclose(basis.Q, Q, rtol=0, atol=1e-15) and torch.allclose(basis.Delta, Delta, rtol=0, atol=1e-15)


def test_explicit_cpu_is_honoured_whatever_the_default_device():
    expected = compute_basis(SEQ, V)
    B, Phi = bigram_and_context(SEQ, V)
    Q, Delta = attention_terms(SEQ, G)
    with torch.device("meta"):  # factories without a device would make meta tensors here
        got = compute_basis(SEQ, V, device="cpu")
        B2, Phi2 = bigram_and_context(SEQ, V, device="cpu")
        Q2, Delta2 = attention_terms(SEQ, G, device="cpu")
    for name, t in expected.tensors().items():
        assert torch.equal(getattr(got, name), t), name
    assert torch.equal(B2, B) and torch.equal(Phi2, Phi) and torch.equal(Q2, Q) and torch.equal(Delta2, Delta)


def test_bigram_and_context_puts_chunks_and_a0_on_the_device(monkeypatch):
    seen = []

    def spy(out, rows, cols, weights):
        seen.append(tuple(t.device.type for t in (out, rows, cols, weights)))
        if len(seen) == 2:
            raise Seen

    monkeypatch.setattr(theory, "add_pairs", spy)
    with pytest.raises(Seen):
        bigram_and_context(SEQ, V, device="meta")
    assert seen == [("meta",) * 4] * 2  # the bigram counts, then the context pairs weighted by A0


def test_attention_terms_hands_chunks_and_centred_g_on_the_device():
    def score_fn(x, y, Gc):
        raise Seen(x.device.type, y.device.type, Gc.device.type)

    with pytest.raises(Seen) as e:
        attention_terms(SEQ, G, device="meta", score_fn=score_fn)
    assert e.value.args == ("meta", "meta", "meta")


@pytest.fixture
def bars(monkeypatch) -> list[dict]:
    """The keyword arguments of every progress bar theory opens (the bar itself is not drawn)."""
    calls = []

    def fake(iterable, **kwargs):
        calls.append(kwargs)
        return iterable

    monkeypatch.setattr(theory, "tqdm", fake)
    return calls


def test_progress_bars_name_the_pass_and_count_its_chunks(bars):
    bigram_and_context(SEQ, V, rows=3)
    attention_terms(SEQ, G, rows=3, progress=True)
    assert bars == [
        {"desc": "B, Phi", "total": 2, "disable": True},
        {"desc": "Q, Delta", "total": 2, "disable": False},
    ]
    bars.clear()
    bigram_and_context(SEQ, V, rows=2, progress=True)
    attention_terms(SEQ, G, rows=4)
    assert bars == [
        {"desc": "B, Phi", "total": 2, "disable": False},
        {"desc": "Q, Delta", "total": 1, "disable": True},
    ]


def test_default_chunks_are_256_and_64_sequences(bars):
    # The chunk size shows as the bar's total: one more sequence than a chunk makes two chunks.
    seq = np.resize(SEQ, (257, T + 1))
    bigram_and_context(seq, V)
    bigram_and_context(seq[:256], V)
    attention_terms(seq[:65], G)
    attention_terms(seq[:64], G)
    assert [b["total"] for b in bars] == [2, 1, 2, 1]
    assert [b["disable"] for b in bars] == [True] * 4


def test_compute_basis_sizes_its_chunks_by_t_and_passes_progress(bars, monkeypatch):
    sized = []
    monkeypatch.setattr(theory, "chunk_rows", lambda T: sized.append(T) or 3)
    expected = compute_basis(SEQ, V)
    assert sized == [T]
    assert bars == [{"desc": "B, Phi", "total": 2, "disable": True}, {"desc": "Q, Delta", "total": 2, "disable": True}]
    bars.clear()
    got = compute_basis(SEQ, V, progress=True)
    assert [b["disable"] for b in bars] == [False, False]
    for name, t in expected.tensors().items():
        assert torch.equal(getattr(got, name), t), name


def test_load_basis_errors_name_the_file_and_the_missing_tensor(tmp_path):
    path = tmp_path / "basis.safetensors"
    with refuses(path, "not found", "assoc_basis"):  # and the stage that writes it
        load_basis(path)
    tensors = {name: torch.zeros(2) for name in theory.BASIS_NAMES if name not in ("G", "Q")}
    save_file(tensors, str(path))
    with refuses(path, "'G'", "missing"):
        load_basis(path)
    save_file({name: torch.zeros(2) for name in theory.BASIS_NAMES if name != "Delta"}, str(path))
    with refuses(path, "'Delta'", "missing"):
        load_basis(path)
    save_file({name: torch.full((2,), float(i)) for i, name in enumerate(theory.BASIS_NAMES)}, str(path))
    assert load_basis(path).Q.tolist() == [4.0, 4.0]
