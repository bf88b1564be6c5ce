"""The closed forms are the leading terms of SGD on the attention-only model (autograd check)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from emergence.core.models.registry import build_model
from emergence.studies.assoc import theory
from emergence.studies.assoc.theory import (
    WEIGHTS,
    attention_terms,
    bigram_and_context,
    compute_basis,
    leading_coefficient,
    score_gradient,
    score_gradient_jacobian,
)

V, T, N = 7, 6, 20


@pytest.fixture(scope="module")
def corpus() -> np.ndarray:
    return np.random.default_rng(0).integers(0, V, size=(N, T + 1))


def sgd_weights(corpus: np.ndarray, n_layers: int, eta: float, steps: int) -> torch.nn.Module:
    model = build_model("attn_only", dict(n_layers=n_layers, d_vocab=V, n_ctx=T, dtype="float64"))
    opt = torch.optim.SGD(model.parameters(), lr=eta)
    x, y = torch.from_numpy(corpus[:, :-1]), torch.from_numpy(corpus[:, 1:])
    for _ in range(steps):
        _, loss = model(x, y)  # full batch: the mean over all N * T positions
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def leading_errors(model, basis, eta: float, steps: int) -> dict[tuple[str, int], float]:
    errors = {}
    for weight in WEIGHTS:
        for layer in range(1 if weight == "W_O" else model.config.n_layers):
            learned = model.weight(weight, layer).detach() / leading_coefficient(weight, steps, eta)
            theory = basis.direction(weight)
            errors[weight, layer] = float((learned - theory).norm() / theory.norm())
    return errors


@pytest.mark.parametrize("n_layers", [1, 2])
def test_closed_forms_are_the_leading_terms_of_sgd(corpus, n_layers, one_thread):
    basis = compute_basis(corpus, V)
    coarse = leading_errors(sgd_weights(corpus, n_layers, 1e-2, 6), basis, 1e-2, 6)
    fine = leading_errors(sgd_weights(corpus, n_layers, 1e-3, 6), basis, 1e-3, 6)
    assert len(fine) == 1 + 3 * n_layers
    for key, err in fine.items():
        assert err < 1e-3, key  # learned / coefficient -> theory as eta -> 0 ...
        assert 8 < coarse[key] / err < 12, key  # ... with a relative error linear in eta (next order)


def test_weights_are_exactly_zero_before_their_first_step(corpus, one_thread):
    model = sgd_weights(corpus, 1, 1e-2, 2)
    assert model.weight("W_O").abs().max() > 0 and model.weight("V", 0).abs().max() > 0
    assert model.weight("W", 0).abs().max() == 0 and model.weight("P", 0).abs().max() == 0


def test_o_t2_score_gradient_equals_the_jacobian_method(corpus):
    x, y = torch.from_numpy(corpus[:, :-1]), torch.from_numpy(corpus[:, 1:])
    G = torch.randn(V, V, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    fast, reference = score_gradient(x, y, G), score_gradient_jacobian(x, y, G)
    assert torch.allclose(fast, reference, rtol=1e-10, atol=1e-12)
    assert torch.all(fast.triu(1) == 0)  # causal: nothing above the diagonal


def test_both_score_gradients_build_a0_on_their_inputs_device(monkeypatch):
    # On a CPU-only machine a CPU A0 would still mix with CPU (or meta) inputs, so the device it is
    # made on is read where it is made: on CUDA a CPU A0 fails against CUDA inputs.
    made_on = []
    real = theory.uniform_causal
    monkeypatch.setattr(theory, "uniform_causal", lambda T, device="cpu": made_on.append(device) or real(T, device))
    x = torch.zeros(2, 4, dtype=torch.long, device="meta")
    G = torch.zeros(V, V, dtype=torch.float64, device="meta")
    assert score_gradient_jacobian(x, x, G).device.type == "meta" and made_on == ["meta"]
    assert score_gradient(x, x, G).device.type == "meta" and made_on == ["meta", "meta"]


def test_streaming_does_not_depend_on_chunk_size(corpus):
    B1, Phi1 = bigram_and_context(corpus, V, rows=3)
    B2, Phi2 = bigram_and_context(corpus, V, rows=N)
    assert torch.allclose(B1, B2) and torch.allclose(Phi1, Phi2)
    G = (B1 @ Phi1).T @ B1
    Q1, D1 = attention_terms(corpus, G, rows=3)
    Q2, D2 = attention_terms(corpus, G, rows=N)
    assert torch.allclose(Q1, Q2) and torch.allclose(D1, D2)


def test_bigram_matches_its_definition(corpus):
    B, Phi = bigram_and_context(corpus, V)
    X = torch.nn.functional.one_hot(torch.from_numpy(corpus[:, :-1]), V).double()  # (N, T, V)
    R = torch.nn.functional.one_hot(torch.from_numpy(corpus[:, 1:]), V).double() - 1 / V
    A0 = torch.ones(T, T, dtype=torch.float64).tril()
    A0 = A0 / A0.sum(1, keepdim=True)
    assert torch.allclose(B, torch.einsum("ntv,ntw->vw", X, R) / (N * T))
    assert torch.allclose(Phi, torch.einsum("ntv,tk,nkw->vw", R, A0, X) / (N * T))
