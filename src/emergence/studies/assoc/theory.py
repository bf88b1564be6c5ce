"""Closed-form leading terms of the attention-only model (Im et al., arXiv 2601.19208).

Notation (all averages are over the N * T positions of the corpus):
    X, Y   one-hot inputs and next tokens of a sequence, each (T, V)
    R      Y - 1/V: the residual against the uniform prediction
    A0     uniform causal attention: row t spreads 1/t over positions 1..t
    B      mean X^T R                 bigram
    Phi    mean R^T A0 X              context
    G      (B Phi)^T B
    D_i    A0 * (C_i - rowmean_{A0}(C_i)),  C_i = R_i G^T X_i^T
    Q      mean X_i^T D_i X_i         attention weights
    Delta  mean of D_i on sub-diagonal k (summed, then / N T)

After s plain-SGD steps of size eta from zero weights, to leading order:
    W_O ~ s eta B,  V(l) ~ C(s,2) eta^2 (B Phi)^T,  W(l), P(l) ~ (3C(s,4) + 2C(s,3)) eta^4 (Q, Delta).
Derivation in brief: at zero weights dL/dlogits = -R / NT, so W_O moves by eta B
per step; V's gradient is (A0 X)^T (-R W_O^T) / NT = -(s eta) (B Phi)^T; the
score gradient is -(W_O coeff)(V coeff) D / NT, whose sum over steps gives
sum_k k C(k,2) = 3 C(s,4) + 2 C(s,3). tests/test_assoc_theory.py checks every
sign and normalisation against autograd.

Everything streams over the corpus in chunks and uses scatter-adds over token
pairs, so memory is O(chunk * T^2 + V^2) whatever the corpus size, and D costs
O(T^2) per sequence (the paper's code builds a T x T x T softmax Jacobian;
`score_gradient_jacobian` keeps that method as the reference).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from math import comb
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from emergence.core.io import PipelineError, atomic_path, finite

WEIGHTS = ("W", "V", "W_O", "P")  # the learned matrices the theory predicts
BASIS_NAMES = ("B", "Phi", "Sigma_B", "G", "Q", "Delta")


@dataclass
class Basis:
    B: torch.Tensor  # (V, V)
    Phi: torch.Tensor  # (V, V)
    Sigma_B: torch.Tensor  # (V, V)
    G: torch.Tensor  # (V, V)
    Q: torch.Tensor  # (V, V)
    Delta: torch.Tensor  # (T,)

    def tensors(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name) for name in BASIS_NAMES}

    def direction(self, weight: str) -> torch.Tensor:
        """The theoretical counterpart of a learned weight."""
        return {"W_O": self.B, "V": (self.B @ self.Phi).T, "W": self.Q, "P": self.Delta}[weight]


def leading_coefficient(weight: str, steps: int, eta: float) -> float:
    """Scalar c with learned weight ~ c * direction after `steps` SGD steps of size `eta`."""
    if weight == "W_O":
        return steps * eta
    if weight == "V":
        return comb(steps, 2) * eta**2
    if weight in ("W", "P"):
        return (3 * comb(steps, 4) + 2 * comb(steps, 3)) * eta**4
    raise ValueError(f"unknown weight '{weight}' (known: {', '.join(WEIGHTS)})")


def first_nonzero_step(weight: str) -> int:
    """Steps before which the weight is exactly zero (its coefficient vanishes)."""
    return {"W_O": 1, "V": 2, "W": 3, "P": 3}[weight]


def chunks(sequences: np.ndarray, rows: int, device: str = "cpu") -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(x, y) chunks of a (N, T + 1) token array: inputs and next tokens, each (n, T) long."""
    for start in range(0, len(sequences), rows):
        block = torch.from_numpy(np.asarray(sequences[start : start + rows], dtype=np.int64)).to(device)
        yield block[:, :-1], block[:, 1:]


def uniform_causal(T: int, device: str = "cpu") -> torch.Tensor:
    """A0: (T, T), row t (0-based) holds 1 / (t + 1) on columns 0..t."""
    tri = torch.ones(T, T, dtype=torch.float64, device=device).tril()
    return tri / tri.sum(dim=1, keepdim=True)


def add_pairs(out: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, weights: torch.Tensor) -> None:
    """out[a, b] += sum of weights where rows == a and cols == b, in place on a (V, V) matrix."""
    V = out.shape[1]
    out.view(-1).index_add_(0, (rows * V + cols).flatten(), weights.flatten())


def chunk_rows(T: int, budget: int = 1 << 22) -> int:
    """Sequences per chunk so that the (n, T, T) pair tensors stay near `budget` elements."""
    return max(1, budget // (T * T))


def bigram_and_context(
    sequences: np.ndarray, V: int, rows: int = 256, device: str = "cpu", progress: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, Phi), both (V, V) float64, in one pass."""
    n_pos = sequences.shape[0] * (sequences.shape[1] - 1)
    A0 = None
    counts_xy = torch.zeros(V, V, dtype=torch.float64, device=device)
    context = torch.zeros(V, V, dtype=torch.float64, device=device)  # sum Y^T A0 X
    attended = torch.zeros(V, dtype=torch.float64, device=device)  # sum 1^T A0 X
    for x, y in tqdm(
        chunks(sequences, rows, device), desc="B, Phi", total=-(-len(sequences) // rows), disable=not progress
    ):
        n, T = x.shape
        A0 = uniform_causal(T, device) if A0 is None else A0
        add_pairs(counts_xy, x, y, torch.ones_like(x, dtype=torch.float64))
        # Y^T A0 X: every causal pair (t, k) adds A0[t, k] at (y_t, x_k).
        add_pairs(context, y[:, :, None].expand(n, T, T), x[:, None, :].expand(n, T, T), A0.expand(n, T, T))
        attended += torch.bincount(x.flatten(), weights=A0.sum(dim=0).expand(n, T).flatten(), minlength=V)
    counts_x = counts_xy.sum(dim=1)  # occurrences of each token as an input
    B = (counts_xy - counts_x[:, None] / V) / n_pos
    Phi = (context - attended[None, :] / V) / n_pos  # R^T A0 X = Y^T A0 X - (1/V) 1 (1^T A0 X)
    return B, Phi


def centred_scores(x: torch.Tensor, y: torch.Tensor, Gc: torch.Tensor) -> torch.Tensor:
    """C_i = R_i G^T X_i^T for a chunk: (n, T, T) with C[t, k] = Gc[x_k, y_t], where Gc is G
    with each row centred (R = Y - 1/V subtracts the row mean)."""
    return Gc[x[:, None, :], y[:, :, None]]


def score_gradient(x: torch.Tensor, y: torch.Tensor, Gc: torch.Tensor) -> torch.Tensor:
    """D for a chunk, (n, T, T), in O(T^2) per sequence: the softmax backward at uniform A0."""
    C = centred_scores(x, y, Gc)  # (n, T, T)
    A0 = uniform_causal(x.shape[1], str(x.device))  # (T, T)
    AC = A0 * C
    return AC - A0 * AC.sum(dim=-1, keepdim=True)


def score_gradient_jacobian(x: torch.Tensor, y: torch.Tensor, Gc: torch.Tensor) -> torch.Tensor:
    """Reference D as the paper's code computes it: the explicit softmax Jacobian of every
    row, a (T, T, T) tensor built per sequence, applied to that sequence's C."""
    A0 = uniform_causal(x.shape[1], str(x.device))
    out = []
    for C_i in centred_scores(x, y, Gc):
        J = torch.diag_embed(A0) - A0[:, :, None] * A0[:, None, :]  # (T, T, T): d a_t / d s_t
        out.append(torch.einsum("tkj,tj->tk", J, C_i))
    return torch.stack(out)


def attention_terms(
    sequences: np.ndarray,
    G: torch.Tensor,
    rows: int = 64,
    device: str = "cpu",
    progress: bool = False,
    score_fn=score_gradient,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(Q (V, V), Delta (T,)) streamed over the corpus; `score_fn` computes D for a chunk
    (bench/assoc_basis.py swaps in the Jacobian reference)."""
    V, T = G.shape[0], sequences.shape[1] - 1
    Gc = (G - G.mean(dim=1, keepdim=True)).to(device)  # once: every chunk gathers from it
    n_pos = sequences.shape[0] * T
    Q = torch.zeros(V, V, dtype=torch.float64, device=device)
    Delta = torch.zeros(T, dtype=torch.float64, device=device)
    offset = (torch.arange(T, device=device)[:, None] - torch.arange(T, device=device)[None, :]).clamp(min=0)
    for x, y in tqdm(
        chunks(sequences, rows, device), desc="Q, Delta", total=-(-len(sequences) // rows), disable=not progress
    ):
        n = x.shape[0]
        D = score_fn(x, y, Gc)  # (n, T, T), zero above the diagonal
        add_pairs(Q, x[:, :, None].expand(n, T, T), x[:, None, :].expand(n, T, T), D)
        Delta += torch.bincount(offset.expand(n, T, T).flatten(), weights=D.flatten(), minlength=T)
    return Q / n_pos, Delta / n_pos


def compute_basis(
    sequences: np.ndarray, V: int, device: str = "cpu", progress: bool = False, q_sequences: np.ndarray | None = None
) -> Basis:
    """Every closed form for a (N, T + 1) corpus of token ids in [0, V); Q and Delta from `q_sequences`
    when given (the authors' BPE script draws them from other batches than B and Phi), with G from B, Phi."""
    rows = chunk_rows(sequences.shape[1] - 1)
    B, Phi = bigram_and_context(sequences, V, rows, device, progress)
    G = (B @ Phi).T @ B
    Q, Delta = attention_terms(sequences if q_sequences is None else q_sequences, G, rows, device, progress)
    return Basis(B=B, Phi=Phi, Sigma_B=B.T @ B, G=G, Q=Q, Delta=Delta)


def save_basis(basis: Basis, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        save_file({name: t.contiguous().cpu() for name, t in basis.tensors().items()}, str(tmp))


def load_basis(path: str | Path) -> Basis:
    path = Path(path)
    if not path.exists():
        raise PipelineError(f"{path}: basis file not found (run assoc_basis first)")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as e:
        raise PipelineError(f"{path}: not a readable safetensors file ({e})") from e
    if missing := [name for name in BASIS_NAMES if name not in tensors]:
        raise PipelineError(f"{path}: basis tensor '{missing[0]}' missing")
    return Basis(**{name: finite(tensors[name], path, f"basis tensor '{name}'") for name in BASIS_NAMES})


def basis_summary(basis: Basis) -> pd.DataFrame:
    """One row per closed form: shape and scale, for the report and quick diffs."""
    rows = []
    for name, t in basis.tensors().items():
        rows.append(
            {
                "name": name,
                "shape": "x".join(map(str, t.shape)),
                "fro_norm": float(t.norm()),
                "max_abs": float(t.abs().max()),
                "mean": float(t.mean()),
            }
        )
    return pd.DataFrame(rows)
