"""Attention-head ablation for binding models: which heads route the bound value?

Each head's output (`blocks.{L}.attn.hook_z`) is replaced by zero or by its
per-position mean over the evaluation programs, and answer accuracy is
re-measured overall and per hop count. Heads whose removal hurts deep chains
most are the candidates for the paper's routing circuit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from emergence.core.models.hooks import HookedModel
from emergence.interp.ablation import ablation_hook, mean_head_activations
from emergence.interp.ablation_modes import MODES
from emergence.studies.binding.batches import EncodedPrograms, predict_answers
from emergence.studies.binding.tokenizer import CharTokenizer


def _accuracy_rows(
    correct: np.ndarray, groups: list[tuple[int, np.ndarray]], cell: dict, baseline: dict[int, float] | None
) -> list[dict]:
    rows = []
    for hops, mask in groups:
        acc = float(correct[mask].mean())
        rows.append({**cell, "hops": hops, "metric": "accuracy", "value": acc, "n": int(mask.sum())})
        if baseline is not None:
            rows.append(
                {**cell, "hops": hops, "metric": "accuracy_drop", "value": baseline[hops] - acc, "n": int(mask.sum())}
            )
    return rows


def ablation_table(
    model: HookedModel,
    data: EncodedPrograms,
    hops: np.ndarray,
    tok: CharTokenizer,
    *,
    seed: int,
    step: int,
    modes: Sequence[str] = MODES,
    batch_size: int = 256,
) -> pd.DataFrame:
    """Tidy rows (seed, step, layer, head, mode, hops, metric, value, n), one head ablated at a time.

    hops = -1 is every program, k the programs with k hops. "accuracy_drop" is
    the unablated accuracy minus the ablated one on the same programs. The
    unablated baseline is layer = head = -1, mode "none". Mean ablation uses
    per-position means over `data` itself.
    """
    with torch.no_grad():
        hops = np.asarray(hops)
        if len(hops) != len(data):
            raise ValueError(f"hops has {len(hops)} entries for {len(data)} programs")
        answers = data.answers.numpy()
        groups = [(-1, np.ones(len(hops), dtype=bool))] + [(int(k), hops == k) for k in np.unique(hops)]
        correct = predict_answers(model, data, tok, batch_size) == answers
        rows = _accuracy_rows(correct, groups, dict(layer=-1, head=-1, mode="none"), None)
        baseline = {row["hops"]: row["value"] for row in rows}
        mean_z = mean_head_activations(model, data.idx, data.answer_pos + 1, batch_size) if "mean" in modes else None
        cells = [
            (layer, head, mode)
            for layer in range(model.config.n_layers)
            for head in range(model.config.n_heads)
            for mode in modes
        ]
        for layer, head, mode in tqdm(cells, desc="head ablations", disable=None):
            with model.hooks([ablation_hook(layer, head, mode, mean_z)]):
                correct = predict_answers(model, data, tok, batch_size) == answers
            rows += _accuracy_rows(correct, groups, dict(layer=layer, head=head, mode=mode), baseline)
        table = pd.DataFrame(rows)
        table.insert(0, "step", np.int64(step))
        table.insert(0, "seed", np.int64(seed))
        return table


def rank_routing_heads(table: pd.DataFrame, deepest_hops: int | None = None) -> pd.DataFrame:
    """Heads ranked (1 = most important) by accuracy drop on the deepest hop class, averaged
    over ablation modes; ties broken by the drop on all programs. Ranked per (seed, step)."""
    drops = table[(table["metric"] == "accuracy_drop") & (table["layer"] >= 0)]
    deep = int(drops["hops"].max()) if deepest_hops is None else deepest_hops
    if deep not in set(drops["hops"]):
        raise ValueError(f"no ablation rows for hops={deep}")
    keys = ["seed", "step", "layer", "head"]
    ranked = pd.concat(
        {
            "drop_all": drops[drops["hops"] == -1].groupby(keys)["value"].mean(),
            "drop_deep": drops[drops["hops"] == deep].groupby(keys)["value"].mean(),
        },
        axis=1,
    ).reset_index()
    ranked = ranked.sort_values(
        ["seed", "step", "drop_deep", "drop_all", "layer", "head"],
        ascending=[True, True, False, False, True, True],
        ignore_index=True,
    )
    ranked["rank"] = ranked.groupby(["seed", "step"]).cumcount() + 1
    return ranked


def heads_by_hop(table: pd.DataFrame, top: int = 3) -> pd.DataFrame:
    """Per hop class, the `top` heads whose ablation costs most: accuracy drop averaged over
    ablation modes and seeds (hops, rank, layer, head, drop, n_seeds). The paper (summary we have)
    names heads per hop: 6.5 / 7.7 for the first hop, 7.2 / 8.3 / 9.4 for the second and third,
    11.2 / 11.3 / 11.7 moving the value to the output."""
    drops = table[(table["metric"] == "accuracy_drop") & (table["layer"] >= 0) & (table["hops"] >= 0)]
    per_seed = drops.groupby(["hops", "layer", "head", "seed"])["value"].mean()
    mean = per_seed.groupby(["hops", "layer", "head"]).agg(drop="mean", n_seeds="size").reset_index()
    mean = mean.sort_values(["hops", "drop", "layer", "head"], ascending=[True, False, True, True], ignore_index=True)
    mean["rank"] = mean.groupby("hops").cumcount() + 1
    return mean[mean["rank"] <= top][["hops", "rank", "layer", "head", "drop", "n_seeds"]].reset_index(drop=True)
