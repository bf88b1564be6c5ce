"""The binding report's mechanism sections: activation patching (by position, by chain depth) and
head ablation (routing heads, heads by hop)."""

from __future__ import annotations

import pandas as pd

from emergence.core.report import html as H
from emergence.core.report import plots
from emergence.studies.binding.ablation import heads_by_hop

PAPER_PATCHING = 0.8  # "> 80% success" at RHS tokens along the query chain (summary we have)


def patching_section(patching: pd.DataFrame) -> str:
    pat = patching[patching["metric"] == "patch_success"]
    if pat.empty:
        return H.para("No patching results.", "note")
    mat = pat.groupby(["layer", "position"])["value"].mean().unstack("position")
    classes = pat.groupby("position")["position_class"].agg(lambda s: s.mode().iloc[0])
    by_class = mat.T.groupby(classes).agg(["mean", "max"]).T  # (layer, stat) x class
    summary = by_class.unstack(1)
    summary.columns = [f"{c} ({stat})" for c, stat in summary.columns]
    parts = [
        H.para(
            "Residual-stream patching: the activation at (layer, position) from a program with a different "
            "answer is patched into the base run; patch success is the fraction of pairs whose output "
            "switches to the source answer (mean over seeds). The strip marks each position's class."
        ),
        H.figure(plots.patching(mat, classes), "patching heat map, layer by position"),
        H.table(
            summary.reset_index(), caption="Patch success per layer and position class (mean / max over positions)"
        ),
    ]
    pairs = patching[patching["metric"] == "pairs_correct"]
    if len(pairs):
        parts.append(
            H.para(
                f"Fraction of patching pairs the model answered correctly (pairs_correct): "
                f"{pairs['value'].mean():.3f}, mean over seeds."
            )
        )
    return "\n".join(parts)


def ablation_section(ablation: pd.DataFrame, routing: pd.DataFrame) -> str:
    drop = ablation[(ablation["metric"] == "accuracy_drop") & (ablation["layer"] >= 0)]
    if drop.empty:
        return H.para("No ablation results.", "note")
    deepest = int(ablation["hops"].max())
    base = ablation[(ablation["mode"] == "none") & (ablation["metric"] == "accuracy")]
    panels = {}
    for mode in sorted(drop["mode"].unique()):
        for hops, label in ((-1, "all hops"), (deepest, f"{deepest} hops")):
            d = drop[(drop["mode"] == mode) & (drop["hops"] == hops)]
            panels[(f"{mode} ablation", label)] = d.groupby(["layer", "head"])["value"].mean().unstack("head")
    base_txt = ", ".join(
        f"{'all' if k == -1 else f'{k} hops'}: {v:.3f}" for k, v in base.groupby("hops")["value"].mean().items()
    )
    return "\n".join(
        [
            H.para(
                "Accuracy drop when one attention head is ablated (zeroed, or replaced by its mean output), "
                f"mean over seeds; red = the head matters. Unablated accuracy: {base_txt or 'n/a'}."
            ),
            H.figure(plots.heatmap_grid(panels), "head ablation accuracy drop"),
            H.para(
                "Candidate routing heads as ranked by the ablation analysis (rank 1 = most important); "
                "drop_all / drop_deep: accuracy drop on all programs / on the deepest hop class."
            ),
            H.table(routing.sort_values("rank")[["rank", "layer", "head", "drop_all", "drop_deep"]]),
        ]
    )


# where along a chain line its value can sit: the right-hand side (the root's constant, or the copied
# variable: the paper's "RHS tokens") or the line's newline, after the line has been read
PATCH_AT = {"rhs": ("chain_root", "chain_rhs"), "newline": ("chain_newline",)}
PATCH_AT_TEXT = {"rhs": "right-hand side", "newline": "newline"}


def depth_patching(patching: pd.DataFrame, at: str = "rhs") -> pd.DataFrame:
    """Patch success per (layer, chain depth) of the patched chain tokens at `at` (PATCH_AT), pooled over
    positions, pairs and seeds (sum of successes / sum of pairs): index layer, columns depth."""
    cells = patching[
        (patching["metric"] == "patch_success")
        & (patching["chain_depth"] >= 0)
        & patching["position_class"].isin(PATCH_AT[at])
    ]
    hits = (cells["value"] * cells["n"]).groupby([cells["layer"], cells["chain_depth"]]).sum()
    return (hits / cells.groupby(["layer", "chain_depth"])["n"].sum()).unstack("chain_depth")


def _weakest(by_depth: pd.DataFrame) -> float:
    """Smallest best-layer success over depths >= 1 (-1 when there is none)."""
    best = [col.max() for d, col in by_depth.items() if d >= 1 and col.notna().any()]
    return min(best) if best else -1.0


def patching_position(patching: pd.DataFrame) -> str:
    """The position the model keeps a chain's values at: of the right-hand side and the newline, the one
    whose weakest depth (>= 1, seeds pooled) patches best; the right-hand side, the paper's, on a tie."""
    return max(PATCH_AT, key=lambda at: (_weakest(depth_patching(patching, at)), at == "rhs"))


def heads_by_step(patching: pd.DataFrame, top: int = 3) -> pd.DataFrame:
    """Per dereference step k (chain depth k >= 1), the `top` heads whose output at line k most often
    moves the answer to the counterfactual one (`head_step_success`, pooled over seeds: hits / pairs);
    columns step, rank, layer, head, success, n. Ties: the lower layer, then the lower head."""
    columns = ["step", "rank", "layer", "head", "success", "n"]
    cells = patching[patching["metric"] == "head_step_success"]
    if cells.empty:
        return pd.DataFrame(columns=columns)
    g = cells.assign(hits=cells["value"] * cells["n"]).groupby(["chain_depth", "layer", "head"])[["hits", "n"]].sum()
    g = g.assign(success=g["hits"] / g["n"]).reset_index()
    g = g.sort_values(["chain_depth", "success", "layer", "head"], ascending=[True, False, True, True])
    g = g.groupby("chain_depth").head(top)
    g["rank"] = g.groupby("chain_depth").cumcount() + 1
    return g.rename(columns={"chain_depth": "step"})[columns].reset_index(drop=True)


def step_heads_section(patching: pd.DataFrame) -> str:
    table = heads_by_step(patching)
    if table.empty:
        return H.para("No head-per-step patching results.", "note")
    return "\n".join(
        [
            H.para(
                "Heads per dereference step: at step k the value moves one link, into the chain line k copies "
                "below the root. Each head's output at that line's right-hand side and newline is taken from "
                "the counterfactual run alone; success is the fraction of pairs (both runs correct, chains of at "
                "least k links) whose answer follows it. The head with the highest success at step k is the one "
                "that moves the value at that step. The paper names heads per hop (12 layers; compare roles)."
            ),
            H.table(table, caption="Top heads per dereference step (layer.head), seeds pooled", float_format="{:.3f}"),
            *(
                H.table(heads_by_step(_of_seed(patching, s)), caption=f"Seed {s}: top heads per dereference step",
                        float_format="{:.3f}")
                for s in _seeds(patching)
            ),
        ]
    )  # fmt: skip


def _seeds(*tables: pd.DataFrame) -> list:
    return sorted(set().union(*(t["seed"].unique() for t in tables if "seed" in t)))


def _of_seed(table: pd.DataFrame, seed) -> pd.DataFrame:
    return table if seed is None else table[table["seed"] == seed]


def mechanism_metrics(patching: pd.DataFrame, ablation: pd.DataFrame) -> dict:
    """JSON-ready: best layer's success per chain depth at the right-hand side and at the newline, the
    position the claim reads (`patching_position`; `patching_by_depth` is the table there), and each hop's
    top heads, pooled over seeds and per seed (`per_seed`)."""
    at = patching_position(patching) if len(patching) else "rhs"

    def depths(table: pd.DataFrame, where: str) -> dict:
        return {
            str(d): {"best_layer": int(col.idxmax()), "success": round(float(col.max()), 6)}
            for d, col in depth_patching(table, where).items()
            if col.notna().any()
        }

    def of(seed) -> dict:
        pat, abl = _of_seed(patching, seed), _of_seed(ablation, seed)
        heads = heads_by_hop(abl) if len(abl) else pd.DataFrame(columns=["hops"])
        steps = heads_by_step(pat)
        return {
            "patching_by_depth": depths(pat, at),
            "heads_by_step": {
                str(k): [f"{r.layer}.{r.head} ({r.success:.3f})" for r in g.itertuples()]
                for k, g in steps.groupby("step")
            },
            **{f"patching_by_depth_{where}": depths(pat, where) for where in PATCH_AT},
            "heads_by_hop": {
                str(h): [f"{r.layer}.{r.head} ({r.drop:.3f})" for r in g.itertuples()] for h, g in heads.groupby("hops")
            },
        }

    return {"patching_position": at} | of(None) | {"per_seed": {str(s): of(s) for s in _seeds(patching, ablation)}}


def _depth_table(mat: pd.DataFrame) -> pd.DataFrame:
    return mat.rename(columns=lambda d: f"depth {d}").rename_axis("layer").reset_index()


def depth_section(patching: pd.DataFrame) -> str:
    mats = {at: depth_patching(patching, at) for at in PATCH_AT}
    if all(m.empty for m in mats.values()):
        return H.para("No patching pairs on the chain (pairs_correct is 0 or the chains are empty).", "note")
    at = patching_position(patching)
    weakest = ", ".join(
        f"{PATCH_AT_TEXT[w]} {_weakest(m):.2f}" if _weakest(m) >= 0 else f"{PATCH_AT_TEXT[w]} not measured"
        for w, m in mats.items()
    )
    parts = [
        H.para(
            "Patch success along the query chain, by layer and chain depth of the patched token (0 = the root "
            "constant's line, k = the line k copies below it), pooled over positions, pairs and seeds, at two "
            "positions of each chain line: its right-hand side (the paper's RHS tokens) and its newline (the "
            "value the line assigns can only be there once the line is read). Depth 0's right-hand side is the "
            "token the pair changes, so its layer-0 success is 1 by construction (a control). The paper reports "
            f"> {PAPER_PATCHING:.0%} success at RHS tokens along the query chain."
        ),
        H.para(
            f"The claim reads the {PATCH_AT_TEXT[at]}: of the two, it is where this model's weakest depth (>= 1, "
            f"best layer) patches best ({weakest})."
        ),
    ]
    for where, mat in mats.items():
        if mat.empty:
            continue
        parts += [
            H.table(_depth_table(mat), caption=f"At the {PATCH_AT_TEXT[where]}: patch success by layer and chain "
                    "depth, seeds pooled"),
            H.figure(plots.heatmap(mat, f"patch success by chain depth, {PATCH_AT_TEXT[where]}"),
                     f"patch success at the {PATCH_AT_TEXT[where]}, layer by chain depth"),
            *(
                H.table(_depth_table(depth_patching(_of_seed(patching, s), where)),
                        caption=f"Seed {s}, at the {PATCH_AT_TEXT[where]}: patch success by layer and chain depth")
                for s in _seeds(patching)
            ),
        ]  # fmt: skip
    return "\n".join(parts)


def hop_heads_section(ablation: pd.DataFrame) -> str:
    drop = ablation[(ablation["metric"] == "accuracy_drop") & (ablation["layer"] >= 0) & (ablation["hops"] >= 0)]
    if drop.empty:
        return H.para("No ablation results.", "note")
    panels = {
        ("accuracy drop", f"{h} hops"): g.groupby(["layer", "head"])["value"].mean().unstack("head")
        for h, g in drop.groupby("hops")
    }
    return "\n".join(
        [
            H.para(
                "For each hop class, the heads whose ablation costs most accuracy (mean over zero and mean "
                "ablation and over seeds). The paper names heads 6.5 / 7.7 for the first hop, 7.2 / 8.3 / 9.4 for "
                "the second and third, and 11.2 / 11.3 / 11.7 carrying the value to the output (12 layers; ours "
                "are smaller, so compare roles, not numbers)."
            ),
            H.table(heads_by_hop(ablation), caption="Top heads per hop class (layer.head), mean over seeds"),
            *(
                H.table(heads_by_hop(_of_seed(ablation, s)), caption=f"Seed {s}: top heads per hop class")
                for s in _seeds(ablation)
            ),
            H.figure(plots.heatmap_grid(panels), "accuracy drop per head, by hop class"),
        ]
    )
