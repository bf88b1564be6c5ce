"""Learned weights of the attention-only model against their closed forms.

Pure functions over (model, basis, corpus) returning tidy tables: one row per
(step, layer, weight) for cosines and leading-order errors, per removed
direction for the causal check, per (probe, matrix, rank) for associations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from emergence.core.io import PipelineError
from emergence.studies.assoc.compare_params import (
    CompareParams,
)
from emergence.studies.assoc.theory import Basis, chunks, first_nonzero_step, leading_coefficient


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Frobenius inner product over the product of norms; NaN when either is exactly zero."""
    a, b = a.detach().double(), b.detach().double()
    norms = float(a.norm() * b.norm())
    return float((a * b).sum()) / norms if norms > 0 else float("nan")


def remove_direction(W: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """W minus its projection on T: W - <W, T> / <T, T> T."""
    T = T.to(W.dtype)
    return W - (W * T).sum() / (T * T).sum() * T


def layer_weights(model: torch.nn.Module) -> Iterable[tuple[int, str, torch.Tensor]]:
    """(layer, weight name, tensor) for every predicted weight; W_O is reported as layer -1."""
    for layer in range(model.config.n_layers):
        for name in ("W", "V", "P"):
            yield layer, name, model.weight(name, layer)
    yield -1, "W_O", model.weight("W_O")


def weight_rows(model: torch.nn.Module, basis: Basis, step: int, eta: float) -> list[dict]:
    """Cosine with theory and relative error of the leading-order prediction, per weight."""
    rows = []
    for layer, name, learned in layer_weights(model):
        theory = basis.direction(name)
        coef = leading_coefficient(name, step, eta)
        predicted = coef * theory
        error = float((learned.detach().double() - predicted).norm() / predicted.norm()) if coef else float("nan")
        rows.append(
            {
                "step": step,
                "layer": layer,
                "weight": name,
                "cosine": cosine(learned, theory),
                "rel_error": error,
                "norm": float(learned.detach().double().norm()),
            }
        )
    return rows


def cosine_table(
    checkpoints: Iterable[tuple[int, torch.nn.Module]],
    bases: dict[str, Basis],
    eta: float,
    steps_per_epoch: int,
    window_epochs: int,
    log_every: int = 0,
) -> pd.DataFrame:
    """Rows per (basis, step, layer, weight), each checkpoint read once for every basis; `in_window`
    marks the log points (epoch ends, or every `log_every` steps when that is more often) inside the
    minimum-cosine window at which the weight is already non-zero."""
    rows = [
        {"basis": name, **row}
        for step, model in checkpoints
        for name, basis in bases.items()
        for row in weight_rows(model, basis, step, eta)
    ]
    table = pd.DataFrame(rows)
    table["epoch"] = table["step"] / steps_per_epoch
    first = table["weight"].map(first_nonzero_step)
    table["in_window"] = (
        (table["step"] % min(steps_per_epoch, log_every or steps_per_epoch) == 0)
        & (table["step"] >= first)
        & (table["step"] <= window_epochs * steps_per_epoch)
    )
    return table


def min_cosine_table(cosines: pd.DataFrame) -> pd.DataFrame:
    """Minimum cosine over the window, per run, layer and weight (the paper's Table 2 reports it over all epochs)."""
    window = cosines[cosines["in_window"]]
    keys = ["n_layers", "seed", "layer", "weight"]
    at_min = window.loc[window.groupby(keys)["cosine"].idxmin(), keys + ["cosine", "step"]]
    counts = window.groupby(keys).size().rename("n_checkpoints").reset_index()
    return (
        at_min.rename(columns={"cosine": "min_cosine", "step": "step_of_min"})
        .merge(counts, on=keys)
        .sort_values(keys)
        .reset_index(drop=True)
    )


def departures(cosines: pd.DataFrame, bars: dict[str, float]) -> pd.DataFrame:
    """How early is early: per run, layer and weight, the first checkpoint whose cosine falls
    below the weight's bar, with the training loss there (NaN step: never fell)."""
    rows = []
    for (n_layers, seed, layer, weight), g in cosines.groupby(["n_layers", "seed", "layer", "weight"]):
        below = g[g["cosine"] < bars[weight]].sort_values("step")
        first = below.iloc[0] if len(below) else None
        rows.append(
            {
                "n_layers": n_layers,
                "seed": seed,
                "layer": layer,
                "weight": weight,
                "bar": bars[weight],
                "first_step_below": float("nan") if first is None else int(first["step"]),
                "epoch": float("nan") if first is None else float(first["epoch"]),
                "corpus_loss": float("nan") if first is None else float(first["corpus_loss"]),
            }
        )
    return pd.DataFrame(rows)


def order_slopes(order: pd.DataFrame) -> pd.DataFrame:
    """Log-log slopes of the leading-order error: against eta at the last step, and against
    the step count at the smallest eta (next order predicts 1 for both)."""
    rows = []
    last = order["step"].max()
    for (layer, weight), group in order.groupby(["layer", "weight"]):
        at_last = group[group["step"] == last]
        smallest = group[(group["eta"] == group["eta"].min()) & (group["step"] >= first_nonzero_step(weight) + 1)]
        rows.append(
            {
                "layer": layer,
                "weight": weight,
                "slope_vs_eta": _slope(at_last["eta"], at_last["rel_error"]),
                "slope_vs_steps": _slope(smallest["step"], smallest["rel_error"]),
            }
        )
    return pd.DataFrame(rows)


def _slope(x: pd.Series, y: pd.Series) -> float:
    if len(x) < 2:
        return float("nan")
    return float(np.polyfit(np.log(x.to_numpy(float)), np.log(y.to_numpy(float)), 1)[0])


def corpus_loss(model: torch.nn.Module, sequences: np.ndarray, rows: int = 256) -> float:
    """Mean next-token cross-entropy over every position of `sequences` (N, T + 1)."""
    with torch.no_grad():
        device = next(model.parameters()).device
        total, count = 0.0, 0
        for x, y in chunks(sequences, rows, str(device)):
            _, loss = model(x, y)
            total += float(loss) * y.numel()
            count += y.numel()
        return total / count


def causal_table(model: torch.nn.Module, basis: Basis, sequences: np.ndarray) -> pd.DataFrame:
    """The paper's causal intervention: training loss after removing each weight's theoretical direction."""
    with torch.no_grad():
        rows = [{"layer": -1, "weight": "none", "loss": corpus_loss(model, sequences), "cosine": float("nan")}]
        for layer, name, learned in layer_weights(model):
            original = learned.detach().clone()
            learned.copy_(remove_direction(original, basis.direction(name)))
            try:
                rows.append(
                    {
                        "layer": layer,
                        "weight": name,
                        "loss": corpus_loss(model, sequences),
                        "cosine": cosine(original, basis.direction(name)),
                    }
                )
            finally:
                learned.copy_(original)
        return pd.DataFrame(rows)


def top_associations(
    matrices: dict[str, torch.Tensor], vocab: Sequence[str], probes: Sequence[str], k: int, where: str = "probes"
) -> pd.DataFrame:
    """For each probe word and matrix: the k tokens with the largest entries in the probe's row (k is at
    most the vocabulary size)."""
    index = {token: i for i, token in enumerate(vocab)}
    for i, probe in enumerate(probes):
        if probe not in index:
            raise PipelineError(f"{where}[{i}]: '{probe}' is not in the corpus vocabulary")
    rows = []
    for name, matrix in matrices.items():
        for probe in probes:
            scores = matrix[index[probe]].detach().double()
            top = torch.topk(scores, k)
            for rank, (score, j) in enumerate(zip(top.values.tolist(), top.indices.tolist()), start=1):
                rows.append({"probe": probe, "matrix": name, "rank": rank, "token": vocab[j], "score": score})
    return pd.DataFrame(rows)


def learned_matrices(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The learned counterparts shown next to the theory's association matrices."""
    named = {"W_O (learned)": model.weight("W_O")}
    named.update({f"V{layer} (learned)": model.weight("V", layer) for layer in range(model.config.n_layers)})
    return named


def theory_matrices(basis: Basis) -> dict[str, torch.Tensor]:
    return {"B": basis.B, "Phi": basis.Phi, "Sigma_B": basis.Sigma_B, "(B Phi)^T": (basis.B @ basis.Phi).T}


BASES = ("corpus", "first_batch")


def first_batch_rows(n: int, batch: int, p: CompareParams, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows for B and Phi, rows for Q and Delta) of the first-batch basis: the first `basis_batches`
    batches of `batch` sequences of a shuffle of the n seeded by `seed`, as the authors take the first
    batch(es) of a shuffled DataLoader (tiny-self-attn-natural.py: one batch for all three;
    tiny-self-attn-bpe.py: 4 batches for B, Phi and the first 4 of a new shuffle for Q). Ours: a
    numpy shuffle of our corpus, seeded by the run's seed, not a torch DataLoader's."""
    rng = np.random.default_rng(seed)
    take = min(n, (batch or n) * p.basis_batches)  # batch 0: full batch, the whole corpus
    rows = np.sort(rng.permutation(n)[:take])
    q_rows = rows if p.basis_q == "same" else np.sort(rng.permutation(n)[:take])
    return rows, q_rows


def checkpoint_steps(every_epochs: float, per_epoch: int, where: str) -> int:
    """Steps between regular checkpoints for `every_epochs` epochs of `per_epoch` steps (0: none); it
    must come to a whole number of steps, so that every run logs at the same points of an epoch."""
    steps = every_epochs * per_epoch
    if abs(steps - round(steps)) > 1e-9 or (every_epochs and round(steps) < 1):
        raise PipelineError(
            f"{where}.checkpoint_every_epochs: {every_epochs} epochs of {per_epoch} steps is {steps:g} steps; "
            "it must come to a whole number of steps (>= 1)"
        )
    return round(steps)
