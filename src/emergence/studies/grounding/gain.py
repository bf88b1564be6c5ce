"""Grounding gain (Wu et al., arXiv 2510.13796): does seeing v<ENV> lower the surprisal of v<LAN>?

G(v) = mean_n mean_{u != v} [ s(v<LAN> | c_n(u<ENV>)) - s(v<LAN> | c_n(v<ENV>)) ],
surprisal s in nats, c_n the n-th held-out context of v and c_n(u<ENV>) the
same context with v<ENV> swapped for another target's u<ENV>.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from emergence.interp.padding import right_pad
from emergence.studies.grounding.tokens import encode, lan, mismatched


def last_log_probs(
    model: torch.nn.Module,
    contexts: Sequence[Sequence[int]],
    batch_size: int = 256,
    prefixes: torch.Tensor | None = None,
    columns: np.ndarray | None = None,
) -> np.ndarray:
    """(N, V) ln p(. | context) read after each context's last token; with `columns` (N,), only
    ln p(columns[n] | context n), (N,), gathered batch by batch so the (N, V) array never exists
    (at paper scale it would be gigabytes).

    Contexts are right-padded: every zoo model is causal, so padding after the
    last real token cannot change its prediction. `prefixes` (N, P, d_prefix):
    each context's environment prefix (models with d_prefix > 0), read first.
    """
    with torch.no_grad():
        device = next(model.parameters()).device
        out = []
        for start in range(0, len(contexts), batch_size):
            chunk = contexts[start : start + batch_size]
            idx, lengths = right_pad(chunk, device)
            extra = {} if prefixes is None else {"prefix": prefixes[start : start + batch_size].to(device)}
            logits, _ = model(idx, **extra)  # (B, P + T, V)
            pos = lengths - 1 + (logits.shape[1] - idx.shape[1])  # past the prefix, if any
            log_probs = logits[torch.arange(len(chunk), device=device), pos].float().log_softmax(-1)  # (B, V)
            if columns is not None:
                picked = torch.as_tensor(columns[start : start + batch_size], device=device)
                log_probs = log_probs.gather(1, picked[:, None])[:, 0]  # (B,)
            out.append(log_probs.cpu().numpy())
        if out:
            return np.concatenate(out)
        return np.zeros(0 if columns is not None else (0, 0), dtype=np.float32)


def target_surprisal(
    model: torch.nn.Module,
    contexts: Sequence[Sequence[int]],
    targets: Sequence[int],
    batch_size: int = 256,
    prefixes: torch.Tensor | None = None,
) -> np.ndarray:
    """-ln p(target | context) for each (context, target), read after the context's last token."""
    if not len(contexts):
        return np.zeros(0)
    return -last_log_probs(model, contexts, batch_size, prefixes, columns=np.asarray(targets, dtype=np.int64))


@dataclass
class EvalPairs:
    """Every (context, target) the gain needs, flattened: row n of the eval set contributes its
    matched context, then one mismatched context per other word."""

    contexts: list[list[int]]
    targets: list[int]
    rows: np.ndarray  # (P,) eval-set row of each pair
    matched: np.ndarray  # (P,) True for the matched context


def evaluation_pairs(eval_set: pd.DataFrame, index: dict[str, int]) -> EvalPairs:
    contexts, targets, rows, matched = [], [], [], []
    for row, (context, word, others) in enumerate(zip(eval_set["context"], eval_set["word"], eval_set["others"])):
        for other in [None, *others]:
            tokens = list(context) if other is None else mismatched(context, word, other)
            contexts.append(encode(tokens, index))
            targets.append(index[lan(word)])
            rows.append(row)
            matched.append(other is None)
    return EvalPairs(contexts, targets, np.array(rows, dtype=np.int64), np.array(matched, dtype=bool))


def gain_table(eval_set: pd.DataFrame, pairs: EvalPairs, surprisal: np.ndarray) -> pd.DataFrame:
    """One row per evaluation context from the pairs' surprisals (P,): s_matched,
    s_mismatched (mean over the other words), gain."""
    n, rows, matched = len(eval_set), pairs.rows, pairs.matched
    s_matched = np.zeros(n)
    s_matched[rows[matched]] = surprisal[matched]
    # float even with no pair at all (numpy's bincount of nothing is int64, whatever the weights)
    s_mismatched = np.bincount(rows[~matched], weights=surprisal[~matched], minlength=n).astype(float)
    s_mismatched /= np.maximum(np.bincount(rows[~matched], minlength=n), 1)
    return pd.DataFrame(
        {
            "context": np.arange(n),
            "word": eval_set["word"].to_numpy(),
            "s_matched": s_matched,
            "s_mismatched": s_mismatched,
            "gain": s_mismatched - s_matched,
        }
    )


def gain_rows(model: torch.nn.Module, eval_set: pd.DataFrame, index: dict[str, int]) -> pd.DataFrame:
    """One row per evaluation context of the model's own predictions."""
    pairs = evaluation_pairs(eval_set, index)
    return gain_table(eval_set, pairs, target_surprisal(model, pairs.contexts, pairs.targets))


def word_gains(rows: pd.DataFrame, keys: Sequence[str] = ("model", "seed", "step")) -> pd.DataFrame:
    """G(v): the mean gain over each word's contexts, per run and checkpoint."""
    return rows.groupby([*keys, "word"], as_index=False)[["s_matched", "s_mismatched", "gain"]].mean()


def sign_flip_test(diffs: np.ndarray, n_perm: int = 10000, seed: int = 0) -> float:
    """One-sided paired test of mean(diffs) > 0: random sign flips of the paired differences."""
    diffs = np.asarray(diffs, dtype=float)
    if len(diffs) == 0:
        return float("nan")
    rng = np.random.default_rng(seed)
    flips = rng.choice([-1.0, 1.0], size=(n_perm, len(diffs)))
    null = (flips * np.abs(diffs)).mean(axis=1)
    return float((1 + np.sum(null >= diffs.mean())) / (1 + n_perm))
