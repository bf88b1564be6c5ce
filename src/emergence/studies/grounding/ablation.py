"""Do the aggregate heads carry grounding? Zero them and watch v<LAN>'s surprisal.

For one checkpoint and one kind of head (aggregate or gather), the matched
surprisal s(v<LAN> | c(v<ENV>)) of every held-out context is measured three
ways: original; with those heads' outputs (`hook_z`) zeroed ("intervention");
with as many random heads from the same layers zeroed, drawn from the other
heads, averaged over several draws ("control"). The paper (Wu et al., arXiv
2510.13796, Table 2) finds intervention > control ~ original for aggregate heads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from emergence.interp.ablation import ablation_hook
from emergence.studies.grounding.ablation_params import HeadAblationParams
from emergence.studies.grounding.gain import target_surprisal
from emergence.studies.grounding.saliency import KINDS


def matched_surprisal(
    model: torch.nn.Module,
    contexts: Sequence[Sequence[int]],
    targets: Sequence[int],
    heads: Sequence[tuple[int, int]] = (),
    prefixes: torch.Tensor | None = None,
) -> np.ndarray:
    """(N,) surprisal of each target with the given (layer, head)s zero-ablated."""
    by_layer: dict[int, list[int]] = defaultdict(list)
    for layer, head in heads:
        by_layer[layer].append(head)
    with model.hooks([ablation_hook(layer, hs, "zero", None) for layer, hs in sorted(by_layer.items())]):
        return target_surprisal(model, contexts, targets, prefixes=prefixes)


def control_heads(heads: Sequence[tuple[int, int]], n_heads: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """As many heads per layer as `heads` has, drawn from that layer's other heads
    (fewer when the layer has too few others left)."""
    by_layer: dict[int, set[int]] = defaultdict(set)
    for layer, head in heads:
        by_layer[layer].add(head)
    drawn = []
    for layer, chosen in sorted(by_layer.items()):
        others = sorted(set(range(n_heads)) - chosen)
        picks = rng.choice(others, size=min(len(chosen), len(others)), replace=False) if others else []
        drawn += [(layer, int(h)) for h in picks]
    return drawn


def ablation_rows(
    model: torch.nn.Module,
    contexts: Sequence[Sequence[int]],
    targets: Sequence[int],
    heads: Sequence[tuple[int, int]],
    n_draws: int,
    seed: int,
    prefixes: torch.Tensor | None = None,
) -> pd.DataFrame:
    """Per context: original, intervention, control (mean over draws) surprisal, and head counts.
    With no heads to ablate the intervention and control columns are NaN; with no other heads left
    in their layers to draw from, the control column is."""
    original = matched_surprisal(model, contexts, targets, prefixes=prefixes)
    n = len(contexts)
    out = pd.DataFrame(
        {
            "context": np.arange(n),
            "original": original,
            "intervention": np.full(n, np.nan),
            "control": np.full(n, np.nan),
            "n_heads": len(heads),
            "n_control_heads": 0,
        }
    )
    if not heads:
        return out
    rng = np.random.default_rng(seed)
    draws = [control_heads(heads, model.config.n_heads, rng) for _ in range(n_draws)]
    out["intervention"] = matched_surprisal(model, contexts, targets, heads, prefixes)
    out["n_control_heads"] = min(len(d) for d in draws)
    if out["n_control_heads"].iloc[0]:
        out["control"] = np.mean([matched_surprisal(model, contexts, targets, d, prefixes) for d in draws], axis=0)
    return out


def checkpoint_ablations(
    models: Iterable[tuple[int, torch.nn.Module]],
    heads: pd.DataFrame,
    contexts: Sequence[Sequence[int]],
    targets: Sequence[int],
    p: HeadAblationParams,
    prefixes: torch.Tensor | None = None,
) -> pd.DataFrame:
    """ablation_rows of each kind of head at every (step, model) checkpoint, plus step and kind columns.
    `heads`: find_heads rows (step, layer, head, kind); control draws seeded by p.seed + step."""
    tables = []
    for step, model in models:
        for kind in KINDS:
            chosen = heads[(heads["step"] == step) & (heads["kind"] == kind)]
            pairs = list(zip(chosen["layer"].tolist(), chosen["head"].tolist()))
            table = ablation_rows(model, contexts, targets, pairs, p.n_draws, p.seed + step, prefixes)
            tables.append(table.assign(step=step, kind=kind))
    return pd.concat(tables, ignore_index=True)
