"""Where grounding flows: attention saliency from v<ENV> to the prediction of v<LAN>.

For each held-out matched context (prediction position p = its last token,
target v<LAN>, v<ENV> at positions E) and every layer l and head h, with
S = A * dL/dA from `saliency.head_saliency` (one backward pass):
- aggregate share of a head: sum_{j in E} |S_h[p, j]| / sum_{i,j} |S_h[i, j]|,
  the part of the head's saliency that carries v<ENV> to the prediction;
- gather share of a head: sum_{i in E, j < i} |S_h[i, j]| / sum |S_h|, the part
  that writes earlier context into the v<ENV> positions;
- layer flow I_l = |sum_h S_h| (Wu et al., arXiv 2510.13796): its share on the
  edges v<ENV> -> p ("env_to_pred") and on all other edges into p ("other_to_pred").
Shares are computed per context, then averaged. Heads whose share reaches the
threshold (the paper: 30 %) are aggregate or gather heads. Where the
environment has many positions (an image prefix) a head's share is large
already at initialisation; baseline "init" then asks instead that the share
rise above the same head's share at step 0 by the threshold's part of what
was left: (s - s0) / (1 - s0) >= threshold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import get_args

import numpy as np
import pandas as pd
import torch

from emergence.core.io import PipelineError
from emergence.interp.padding import right_pad
from emergence.interp.saliency import head_saliency
from emergence.studies.grounding.saliency_params import Baseline
from emergence.studies.grounding.tokens import encode, env, lan

HEAD_METRICS = ("aggregate_share", "gather_share")
LAYER_METRICS = ("env_to_pred", "other_to_pred")
KINDS = {"aggregate": "aggregate_share", "gather": "gather_share"}
# Per-checkpoint columns (and kinds) of the saliency and heads artifacts, after the run keys.
SALIENCY_COLUMNS = {"step": "i", "layer": "i", "head": "i", "metric": "O", "value": "f"}
HEAD_COLUMNS = {"step": "i", "layer": "i", "head": "i", "kind": "O"}
BASELINES = get_args(Baseline)


def matched_inputs(
    eval_set: pd.DataFrame, index: dict[str, int], column: str = "context"
) -> tuple[list[list[int]], list[int], list[list[int]]]:
    """(contexts, targets, v<ENV> positions) of the matched evaluation contexts in `column`."""
    contexts, targets, env_pos = [], [], []
    for context, word in zip(eval_set[column], eval_set["word"]):
        contexts.append(encode(context, index))
        targets.append(index[lan(word)])
        env_pos.append([i for i, tok in enumerate(context) if tok == env(word)])
    return contexts, targets, env_pos


def _batch(contexts: Sequence[Sequence[int]], env_pos: Sequence[Sequence[int]]):
    """Right-padded ids (B, T), prediction positions (B,), v<ENV> mask (B, T)."""
    idx, lengths = right_pad(contexts)
    env_mask = torch.zeros(idx.shape, dtype=torch.bool)
    for b, pos in enumerate(env_pos):
        env_mask[b, pos] = True
    return idx, lengths - 1, env_mask


def _shares(part: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    return torch.where(total > 0, part / total.clamp(min=1e-30), torch.zeros_like(part))


def saliency_shares(
    model: torch.nn.Module,
    contexts: Sequence[Sequence[int]],
    targets: Sequence[int],
    env_pos: Sequence[Sequence[int]],
    prefixes: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Per-context shares of one batch: head metrics (B, L, H), layer metrics (B, L).

    With `prefixes` (B, P, d_prefix), e.g. image features, the P prefix
    positions come first and count as environment positions too.
    """
    device = next(model.parameters()).device
    idx, pred, env_mask = (t.to(device) for t in _batch(contexts, env_pos))
    extra = {}
    if prefixes is not None:
        n_prefix = prefixes.shape[1]
        extra = {"prefix": prefixes.to(device)}
        pred = pred + n_prefix
        env_mask = torch.cat([torch.ones(len(idx), n_prefix, dtype=torch.bool, device=device), env_mask], dim=1)
    S = head_saliency(model, idx, pred, torch.tensor(targets, device=device), **extra)  # (L, B, H, T, T)
    T = S.shape[-1]
    at_pred = torch.nn.functional.one_hot(pred, T).bool()  # (B, T)
    into_pred = at_pred[:, :, None] & torch.ones(T, T, dtype=torch.bool, device=device)  # (B, T, T) rows = p
    env_to_pred = at_pred[:, :, None] & env_mask[:, None, :]  # (B, T, T)
    earlier = torch.ones(T, T, dtype=torch.bool, device=device).tril(-1)  # j < i
    into_env = env_mask[:, :, None] & earlier  # (B, T, T)

    def edge_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # (L, B, [H,] T, T) -> (B, L[, H])
        m = mask[None, :, None] if x.dim() == 5 else mask[None]
        return (x * m).sum((-1, -2)).transpose(0, 1)

    head_abs, layer_flow = S.abs(), S.sum(dim=2).abs()  # (L,B,H,T,T), (L,B,T,T)
    head_total, layer_total = head_abs.sum((-1, -2)).transpose(0, 1), layer_flow.sum((-1, -2)).transpose(0, 1)
    return {
        "aggregate_share": _shares(edge_sum(head_abs, env_to_pred), head_total),
        "gather_share": _shares(edge_sum(head_abs, into_env), head_total),
        "env_to_pred": _shares(edge_sum(layer_flow, env_to_pred), layer_total),
        "other_to_pred": _shares(edge_sum(layer_flow, into_pred & ~env_to_pred), layer_total),
    }


def saliency_rows(
    model: torch.nn.Module,
    contexts: Sequence[Sequence[int]],
    targets: Sequence[int],
    env_pos: Sequence[Sequence[int]],
    batch_size: int = 64,
    prefixes: torch.Tensor | None = None,
) -> pd.DataFrame:
    """Tidy rows (layer, head, metric, value), shares averaged over contexts; head = -1 for layer flow."""
    sums: dict[str, torch.Tensor] = {}
    for s in range(0, len(contexts), batch_size):
        part = saliency_shares(
            model,
            contexts[s : s + batch_size],
            targets[s : s + batch_size],
            env_pos[s : s + batch_size],
            None if prefixes is None else prefixes[s : s + batch_size],
        )
        for k, v in part.items():
            sums[k] = sums.get(k, 0) + v.sum(0).cpu()
    rows = []
    for metric in HEAD_METRICS:
        mean = (sums[metric] / len(contexts)).numpy()  # (L, H)
        rows += [
            (layer, head, metric, float(mean[layer, head]))
            for layer in range(mean.shape[0])
            for head in range(mean.shape[1])
        ]
    for metric in LAYER_METRICS:
        mean = (sums[metric] / len(contexts)).numpy()  # (L,)
        rows += [(layer, -1, metric, float(mean[layer])) for layer in range(len(mean))]
    return pd.DataFrame(rows, columns=["layer", "head", "metric", "value"])


def saliency_table(
    models: Iterable[tuple[int, torch.nn.Module]],
    contexts: Sequence[Sequence[int]],
    targets: Sequence[int],
    env_pos: Sequence[Sequence[int]],
    batch_size: int = 64,
    prefixes: torch.Tensor | None = None,
) -> pd.DataFrame:
    """saliency_rows of every (step, model) checkpoint: rows (step, layer, head, metric, value)."""
    tables = [
        saliency_rows(model, contexts, targets, env_pos, batch_size, prefixes).assign(step=step)
        for step, model in models
    ]
    return pd.concat(tables, ignore_index=True)[list(SALIENCY_COLUMNS)]


def rise_over_init(saliency: pd.DataFrame) -> pd.Series:
    """Each row's value as its rise above the same run, layer, head and metric at step 0 (random init),
    over the room that was left: (s - s0) / (1 - s0); 0 at step 0."""
    keys = [c for c in saliency.columns if c not in ("step", "value")]
    init = saliency.loc[saliency["step"] == 0, [*keys, "value"]]
    if init.empty:
        raise PipelineError("saliency: no step-0 checkpoint (random init) to measure the heads' rise from")
    s0 = saliency[keys].merge(init, on=keys, how="left")["value"].to_numpy()
    return pd.Series((saliency["value"].to_numpy() - s0) / np.clip(1.0 - s0, 1e-12, None), index=saliency.index)


def find_heads(saliency: pd.DataFrame, threshold: float, baseline: str = "none") -> pd.DataFrame:
    """Aggregate and gather heads: rows (..., layer, head, kind, share) whose share >= threshold, or with
    baseline "init" whose rise over their step-0 share (rise_over_init) >= threshold."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    measure = rise_over_init(saliency) if baseline == "init" else saliency["value"]
    found = []
    for kind, metric in KINDS.items():
        hits = saliency[(saliency["metric"] == metric) & (measure >= threshold)]
        found.append(hits.drop(columns="metric").rename(columns={"value": "share"}).assign(kind=kind))
    out = pd.concat(found, ignore_index=True)
    keys = [c for c in out.columns if c not in ("layer", "head", "kind", "share")]
    return out[[*keys, "layer", "head", "kind", "share"]].sort_values(
        [*keys, "kind", "layer", "head"], ignore_index=True
    )


def head_summary(heads: pd.DataFrame, keys: Sequence[str] = ("model", "seed", "step")) -> pd.DataFrame:
    """Count and mean layer of each kind of head per run and checkpoint (the paper's Table 2)."""
    g = heads.groupby([*keys, "kind"])["layer"]
    return pd.concat({"count": g.size(), "mean_layer": g.mean()}, axis=1).reset_index()
