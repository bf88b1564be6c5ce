"""Is grounding just co-occurrence? R^2 of G(v) regressed on (v<ENV>, v<LAN>) statistics.

Statistics come from the training turns only (held-out evaluation turns
removed): how often each form occurs, in how many turns both occur, and their
turn-level PMI. The paper (Wu et al., arXiv 2510.13796) finds R^2 rising early
and falling later: the model learns beyond co-occurrence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from emergence.core.io import PipelineError
from emergence.studies.grounding.tokens import env, lan

FEATURES = ("log_cooc", "pmi", "p_lan_given_env", "log_env", "log_lan")


def cooccurrence_stats(turns: pd.DataFrame, held_out: set[int], targets: Sequence[str]) -> pd.DataFrame:
    """One row per target: token counts, turns holding each form and both, and the features.
    Counts are smoothed by 0.5 inside the logs so a pair never seen together stays finite."""
    train = [set(toks) for i, toks in zip(turns.index, turns["tokens"]) if i not in held_out]
    counts = pd.Series([t for toks in turns.loc[~turns.index.isin(held_out), "tokens"] for t in toks]).value_counts()
    rows = []
    for w in targets:
        has_env = np.array([env(w) in s for s in train])
        has_lan = np.array([lan(w) in s for s in train])
        rows.append(
            {
                "word": w,
                "n_env": int(counts.get(env(w), 0)),
                "n_lan": int(counts.get(lan(w), 0)),
                "turns_env": int(has_env.sum()),
                "turns_lan": int(has_lan.sum()),
                "turns_both": int((has_env & has_lan).sum()),
            }
        )
    stats = pd.DataFrame(rows)
    n_turns, half = max(len(train), 1), 0.5
    stats["log_cooc"] = np.log(stats["turns_both"] + half)
    stats["pmi"] = np.log(
        (stats["turns_both"] + half) * n_turns / ((stats["turns_env"] + half) * (stats["turns_lan"] + half))
    )
    stats["p_lan_given_env"] = (stats["turns_both"] + half) / (stats["turns_env"] + 2 * half)
    stats["log_env"] = np.log(stats["n_env"] + half)
    stats["log_lan"] = np.log(stats["n_lan"] + half)
    return stats


def r_squared(y: np.ndarray, X: np.ndarray) -> tuple[float, float]:
    """(R^2, adjusted R^2) of an ordinary least-squares fit of y on X plus an intercept."""
    n, k = X.shape
    A = np.column_stack([np.ones(n), X])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    ss_res = float(((y - A @ coef) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    adj = 1.0 - (1.0 - r2) * (n - 1) / (n - k - 1) if n > k + 1 else float("nan")
    return r2, adj


def r2_table(
    word_gains: pd.DataFrame,
    stats: pd.DataFrame,
    features: Sequence[str],
    keys: Sequence[str] = ("model", "seed", "step"),
) -> pd.DataFrame:
    """R^2 of G(v) on the features, one row per run and checkpoint."""
    if not features or set(features) - set(FEATURES):
        raise ValueError(f"features: a non-empty subset of {list(FEATURES)}, got {list(features)}")
    data = word_gains.merge(stats[["word", *features]], on="word", how="inner")
    rows = []
    for key, g in data.groupby(list(keys), sort=True):
        r2, adj = r_squared(g["gain"].to_numpy(float), g[list(features)].to_numpy(float))
        rows.append({**dict(zip(keys, key)), "n_words": len(g), "r2": r2, "adj_r2": adj})
    return pd.DataFrame(rows)


@dataclasses.dataclass
class CoocParams:
    features: list[str] = dataclasses.field(default_factory=lambda: ["log_cooc", "pmi"])

    def validate(self, where: str) -> None:
        if not self.features or set(self.features) - set(FEATURES):
            raise PipelineError(f"{where}.features: a non-empty subset of {list(FEATURES)}, got {self.features}")
