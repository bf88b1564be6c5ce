"""Attention saliency S = A * d(-log p)/dA checked without the code's own loss function.

test_saliency.py compares the one-backward saliency with a per-layer loop, but both use
`target_loss`, so a wrong loss (say, the raw logit) passes there. Here the expected values
come from elsewhere: from a hand derivation on a one-head, two-position model, and from
finite differences of -log p (written out below, not `target_loss`) on a real Transformer.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from emergence.core.models.hooks import HookedModel, HookPoint
from emergence.core.models.registry import build_model
from emergence.interp.saliency import head_saliency, layer_flow

pytestmark = pytest.mark.usefixtures("one_thread")


class _Attn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hook_pattern = HookPoint()


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = _Attn()


class OneHeadModel(HookedModel):
    """One layer, one head, no residual: logits_i = sum_j A_ij * values[idx_j].

    The attention scores are a parameter (so the pattern sits in the autograd graph) and the
    value of token x is written straight into the logits, so d(logits_i)/d(A_ij) = values[idx_j].
    """

    def __init__(self, scores: torch.Tensor, values: torch.Tensor) -> None:
        super().__init__()
        self.scores = nn.Parameter(scores.double())  # (T, T) pre-softmax
        self.values = nn.Parameter(values.double())  # (V, V): token -> logit vector
        self.blocks = nn.ModuleList([_Block()])
        self._setup_hook_points()

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        B, T = idx.shape
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        pattern = self.scores[:T, :T].masked_fill(~causal, float("-inf")).softmax(-1)  # (T, T)
        pattern = self.blocks[0].attn.hook_pattern(pattern.expand(B, 1, T, T))  # (B, H=1, T, T)
        return pattern[:, 0] @ self.values[idx], None  # (B, T, V)


LN3, E = math.log(3.0), math.e


def one_head_model() -> OneHeadModel:
    # Scores all zero: row 1 of A is (1/2, 1/2), row 0 is (1, 0).
    # Token 0's value is (2 ln 3, 0), token 1's is (0, 2); every sequence below is [0, 1].
    return OneHeadModel(torch.zeros(2, 2), torch.tensor([[2 * LN3, 0.0], [0.0, 2.0]]))


def test_saliency_of_a_one_head_model_matches_the_hand_derivation():
    # Hand derivation, L = -log p(t) at position i, z_i = sum_j A_ij v_j (the logits):
    #   dL/dz_i = p_i - e_t, so dL/dA_ij = (p_i - e_t) . v_j and S_ij = A_ij (p_i - e_t) . v_j;
    #   only row i can matter (rows != i: S = 0), and the masked A_01 = 0 gives S_01 = 0.
    # Position 1: z_1 = (v_0 + v_1) / 2 = (ln 3, 1), p_1 = (3, e) / (3 + e).
    #   target 0: p_1 - e_0 = (-e, e) / (3 + e)
    #     S_10 = 1/2 * (-e / (3 + e)) * 2 ln 3 = -e ln 3 / (3 + e)
    #     S_11 = 1/2 * (e / (3 + e)) * 2       =  e / (3 + e)
    #   target 1: p_1 - e_1 = (3, -3) / (3 + e)
    #     S_10 = 1/2 * (3 / (3 + e)) * 2 ln 3  =  3 ln 3 / (3 + e)
    #     S_11 = 1/2 * (-3 / (3 + e)) * 2      = -3 / (3 + e)
    # Position 0: z_0 = v_0 = (2 ln 3, 0), p_0 = (9, 1) / 10; target 0: p_0 - e_0 = (-1/10, 1/10)
    #     S_00 = 1 * (-1/10) * 2 ln 3 = -ln 3 / 5, and row 1 is zero.
    # (With the raw logit as the loss instead, S_10 would be 1/2 * 2 ln 3 = ln 3 for target 0.)
    model = one_head_model()
    idx = torch.tensor([[0, 1], [0, 1], [0, 1]])
    S = head_saliency(model, idx, torch.tensor([1, 1, 0]), torch.tensor([0, 1, 0]))
    assert S.shape == (1, 3, 1, 2, 2)
    expected = torch.tensor(
        [
            [[0.0, 0.0], [-E * LN3 / (3 + E), E / (3 + E)]],
            [[0.0, 0.0], [3 * LN3 / (3 + E), -3 / (3 + E)]],
            [[-LN3 / 5, 0.0], [0.0, 0.0]],
        ],
        dtype=S.dtype,
    )
    torch.testing.assert_close(S[0, :, 0], expected, atol=1e-6, rtol=1e-5)
    # One head: the layer's flow I = |sum_h S| is |S| edge by edge, e.g. (e ln 3, e) / (3 + e) for target 0.
    torch.testing.assert_close(layer_flow(S)[0, :, 1], expected[:, 1].abs(), atol=1e-6, rtol=1e-5)


def surprisal(logits: torch.Tensor, positions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-log p(target) per sequence, (B,), in float64: log-sum-exp minus the target's logit."""
    rows = torch.arange(len(positions))
    at = logits[rows, positions].double()  # (B, V)
    return torch.logsumexp(at, dim=-1) - at[rows, targets]


def test_saliency_equals_attention_times_a_finite_difference_of_the_surprisal():
    # S_{l,h}[b, i, j] = A[b, i, j] * dL_b/dA[b, i, j], the derivative taken with the other
    # entries of A (and every other layer's pattern recomputed downstream, as autograd does).
    # A central difference of -log p with A[b, h, i, j] moved by +-eps through the hook point
    # gives that derivative to O(eps^2) without going through `target_loss`.
    torch.manual_seed(0)
    L, H, T, V = 2, 2, 5, 7
    model = build_model("transformer", dict(n_layers=L, d_model=16, n_heads=H, d_head=8, d_mlp=32, n_ctx=T, d_vocab=V))
    model = model.double().eval()
    with torch.no_grad():  # the 0.02-scale init gives near-uniform outputs: widen it so S is O(0.1)
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.5)
    idx = torch.randint(0, V, (3, T), generator=torch.Generator().manual_seed(1))
    positions, targets = torch.tensor([4, 2, 3]), torch.tensor([1, 5, 0])
    S = head_saliency(model, idx, positions, targets)  # (L, B, H, T, T)

    eps = 1e-5
    fd = torch.zeros_like(S)
    kept: dict[str, torch.Tensor] = {}

    def shifted(layer: int, h: int, i: int, j: int, delta: float) -> torch.Tensor:
        def shift(pattern: torch.Tensor, name: str) -> torch.Tensor:
            kept[name] = pattern.detach()
            out = pattern.clone()
            out[:, h, i, j] += delta  # every sequence at once: each loss sees only its own pattern
            return out

        with torch.no_grad(), model.hooks([(f"blocks.{layer}.attn.hook_pattern", shift)]):
            logits, _ = model(idx)
        return surprisal(logits, positions, targets)

    for layer in range(L):
        for h in range(H):
            for i in range(T):
                for j in range(i + 1):  # causal entries; the rest of A is 0
                    d = (shifted(layer, h, i, j, eps) - shifted(layer, h, i, j, -eps)) / (2 * eps)
                    fd[layer, :, h, i, j] = kept[f"blocks.{layer}.attn.hook_pattern"][:, h, i, j] * d
    assert S.abs().max() > 0.05  # a test with power: S far above the tolerance
    torch.testing.assert_close(S, fd, atol=1e-6, rtol=1e-4)


def test_layer_flow_sums_signed_heads_before_the_absolute_value():
    # I_l = |sum_h S_{l,h}|: two heads of opposite sign on an edge cancel, they do not add up.
    S = torch.zeros(2, 1, 3, 2, 2)  # (L, B, H, T, T)
    S[0, 0, :, 1, 0] = torch.tensor([0.5, -0.5, 0.25])
    S[1, 0, :, 1, 1] = torch.tensor([-1.0, -2.0, 0.5])
    expected = torch.zeros(2, 1, 2, 2)
    for layer in range(2):
        for i in range(2):
            for j in range(2):
                expected[layer, 0, i, j] = abs(sum(float(S[layer, 0, h, i, j]) for h in range(3)))
    torch.testing.assert_close(layer_flow(S), expected)
    assert float(layer_flow(S)[0, 0, 1, 0]) == pytest.approx(0.25) and float(layer_flow(S)[1, 0, 1, 1]) == 2.5
