"""reports/grounding.html, mechanistic sections: co-occurrence R^2, tuned lens, saliency, heads, ablation.

Every function takes the concatenated per-run Parquet tables (a `model` and a
`seed` column) and aggregates over seeds itself, so the page shows means with
their seed spread and tests that pool seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib as mpl
import numpy as np
import pandas as pd

from emergence.core.report import html as H
from emergence.core.report.plots import new_figure, plot_style, step_axis
from emergence.interp.llc import llc_curve, unsettled_note
from emergence.studies.grounding.gain import sign_flip_test
from emergence.studies.grounding.saliency import head_summary

# Wu et al., arXiv 2510.13796, Table 2 (review): aggregate heads (count, mean layer) and the matched
# surprisal of v<LAN> with them ablated (intervention), with as many random heads (control) and with none
# (Transformer, CHILDES; intervention vs control p < 0.001 at every checkpoint).
PAPER_ABLATION = pd.DataFrame(
    {
        "step": [5000, 10000, 20000],
        "aggregate heads": [2.28, 5.09, 6.71],
        "mean layer": [7.38, 7.28, 7.52],
        "intervention": [6.51, 5.86, 5.62],
        "control": [6.39, 5.29, 4.76],
        "original": [6.38, 5.30, 4.77],
    }
)
TABLE2_FRACTIONS = (0.25, 0.5, 1.0)  # the paper's 5k / 10k / 20k of 20,000 steps, as fractions of training


def _colours(n: int):
    cmap = mpl.colormaps["viridis"]
    return [cmap(i / max(n - 1, 1)) for i in range(n)]


# --- co-occurrence --------------------------------------------------------------------------


def r2_curve(cooc: pd.DataFrame) -> pd.DataFrame:
    g = cooc.groupby(["model", "step"])
    return pd.concat(
        {
            "r2": g["r2"].mean(),
            "r2_min": g["r2"].min(),
            "r2_max": g["r2"].max(),
            "adj_r2": g["adj_r2"].mean(),
            "n_words": g["n_words"].first(),
        },
        axis=1,
    ).reset_index()


def cooc_section(cooc: pd.DataFrame, words: pd.DataFrame, features: list[str]) -> str:
    curve = r2_curve(cooc)
    with plot_style():
        fig, axes = new_figure(6, 3)
        ax = axes[0, 0]
        for i, (model, c) in enumerate(curve.groupby("model")):
            colour = mpl.colormaps["tab10"](i)
            ax.fill_between(c["step"], c["r2_min"], c["r2_max"], color=colour, alpha=0.2, lw=0)
            ax.plot(c["step"], c["r2"], color=colour, label=model)
        ax.set_ylabel("R² of G(v) on co-occurrence")
        ax.set_ylim(0, 1)
        ax.legend()
        step_axis(ax, curve["step"])
    return "\n".join(
        [
            H.para(
                f"Per checkpoint, G(v) of each target word is regressed (least squares, intercept) on "
                f"{', '.join(features)} of (v<ENV>, v<LAN>) in the training turns; lines are means over seeds, "
                "bands the seed range. The paper finds R² rising and then falling: learning beyond co-occurrence."
            ),
            H.figure(fig, "R squared of grounding gain on co-occurrence over training"),
            "<details><summary>R² per checkpoint</summary>" + H.table(curve, float_format="{:.4f}") + "</details>",
            "<details><summary>Co-occurrence statistics per word</summary>" + H.table(words) + "</details>",
        ]
    )


# --- tuned lens ------------------------------------------------------------------------------


def lens_curve(lens: pd.DataFrame) -> pd.DataFrame:
    return lens.groupby(["model", "step", "lens", "layer"], as_index=False)[
        ["s_matched", "s_mismatched", "gain", "kl"]
    ].mean()


def lens_section(lens: pd.DataFrame) -> str:
    curve = lens_curve(lens)
    models = sorted(curve["model"].unique())
    with plot_style():
        fig, axes = new_figure(4.2 * len(models), 3, 1, len(models))
        for ax, model in zip(axes[0], models):
            c = curve[curve["model"] == model]
            steps = sorted(c["step"].unique())
            for colour, step in zip(_colours(len(steps)), steps):
                for name, style in (("tuned", "-"), ("logit", ":")):
                    d = c[(c["step"] == step) & (c["lens"] == name)]
                    ax.plot(
                        d["layer"],
                        d["gain"],
                        style,
                        color=colour,
                        marker="o" if name == "tuned" else None,
                        ms=3,
                        label=f"step {step}" if name == "tuned" else None,
                    )
            ax.axhline(0, color="#555", lw=0.8)
            ax.set_xlabel("layer read (last = model output)")
            ax.set_ylabel("G read through the lens (nats)")
            ax.set_title(f"{model}: tuned lens (solid), logit lens (dotted)")
            ax.legend()
    kl = curve[curve["step"] == curve.groupby("model")["step"].transform("max")]
    kl = kl.pivot_table(index=["model", "layer"], columns="lens", values="kl").reset_index()
    return "\n".join(
        [
            H.para(
                "An affine translator per layer (zero-initialised, residual) is trained to match the final "
                "next-token distribution (KL), then the grounding gain is read out at every layer."
            ),
            H.figure(fig, "grounding gain per layer through the tuned lens"),
            H.table(
                kl,
                caption="Lens quality at the last checkpoint: KL(final || lens) per layer, mean over seeds",
                float_format="{:.4f}",
            ),
            "<details><summary>Every lens checkpoint</summary>" + H.table(curve, float_format="{:.4f}") + "</details>",
        ]
    )


# --- saliency and heads ----------------------------------------------------------------------


def flow_curve(saliency: pd.DataFrame) -> pd.DataFrame:
    layer = saliency[saliency["head"] == -1]
    return layer.pivot_table(index=["model", "step", "layer"], columns="metric", values="value").reset_index()


def saliency_section(saliency: pd.DataFrame, env: str = "v<ENV>") -> str:
    """Layer flow from the environment positions (`env`, as the page names them) to the prediction."""
    curve = flow_curve(saliency)
    models = sorted(curve["model"].unique())
    with plot_style():
        fig, axes = new_figure(4.2 * len(models), 3, 1, len(models))
        for ax, model in zip(axes[0], models):
            c = curve[curve["model"] == model]
            layers = sorted(c["layer"].unique())
            for colour, layer in zip(_colours(len(layers)), layers):
                d = c[c["layer"] == layer].sort_values("step")
                ax.plot(d["step"], d["env_to_pred"], color=colour, label=f"layer {layer}")
            ax.set_ylabel(f"{env} → prediction share")
            ax.set_title(f"{model}: saliency flow by layer")
            ax.legend()
            step_axis(ax, c["step"])
    return "\n".join(
        [
            H.para(
                "I_l = |Σ_h A_{h,l} ⊙ ∂L/∂A_{h,l}| at the prediction of v<LAN> (matched held-out contexts, one "
                f"backward pass for all layers and heads); plotted: the share of I_l on the edges {env} → "
                "prediction position, mean over contexts and seeds. other_to_pred: the share on all other edges "
                "into the prediction position."
            ),
            H.figure(fig, f"saliency flow from {env} to the prediction by layer over training"),
            "<details><summary>Layer flow per checkpoint</summary>"
            + H.table(curve, float_format="{:.4f}")
            + "</details>",
        ]
    )


def heads_table(heads: pd.DataFrame, saliency: pd.DataFrame) -> pd.DataFrame:
    """Per model, checkpoint and kind: heads found (mean over seeds) and their mean layer."""
    runs = saliency[["model", "seed", "step"]].drop_duplicates()
    kinds = pd.DataFrame({"kind": ["aggregate", "gather"]})
    grid = runs.merge(kinds, how="cross")
    per_run = grid.merge(head_summary(heads), on=["model", "seed", "step", "kind"], how="left")
    per_run["count"] = per_run["count"].fillna(0)
    g = per_run.groupby(["model", "step", "kind"])
    table = pd.concat({"heads (mean over seeds)": g["count"].mean(), "mean layer": g["mean_layer"].mean()}, axis=1)
    return table.reset_index().pivot(index=["model", "step"], columns="kind").reset_index()


def heads_section(heads: pd.DataFrame, saliency: pd.DataFrame, threshold: float, env: str = "v<ENV>") -> str:
    table = heads_table(heads, saliency)
    table.columns = [" ".join(str(p) for p in c if p) for c in table.columns]
    return "\n".join(
        [
            H.para(
                f"Aggregate heads: >= {threshold:.0%} of a head's |saliency| on the edges {env} → prediction "
                f"position; gather heads: >= {threshold:.0%} on edges into {env} positions from earlier ones "
                "(the paper's Table 2 criterion)."
            ),
            H.table(table, caption="Heads found per checkpoint", float_format="{:.2f}"),
            *[
                H.para(f"No {kind} head reaches the threshold at any checkpoint.")
                for kind in ("aggregate", "gather")
                if not (heads["kind"] == kind).any()
            ],
        ]
    )


# --- ablation --------------------------------------------------------------------------------


def ablation_table(ablation: pd.DataFrame) -> pd.DataFrame:
    """Per model, checkpoint and kind: mean surprisal original / intervention / control and the
    one-sided sign-flip p of intervention > control over the (seed, context) pairs that have a control."""
    rows = []
    for (model, step, kind), g in ablation.groupby(["model", "step", "kind"]):
        done = g.dropna(subset=["intervention"])
        paired = done.dropna(subset=["control"])
        same = done if len(done) else g  # original over the runs that have heads, else over all
        rows.append(
            {
                "model": model,
                "step": int(step),
                "kind": kind,
                "runs with heads": done["seed"].nunique(),
                "heads (mean)": g.groupby("seed")["n_heads"].first().mean(),
                "control heads (mean)": g.groupby("seed")["n_control_heads"].first().mean(),
                "original": same["original"].mean(),
                "intervention": done["intervention"].mean() if len(done) else np.nan,
                "control": done["control"].mean() if len(done) else np.nan,
                "p (intervention > control)": sign_flip_test((paired["intervention"] - paired["control"]).to_numpy())
                if len(paired)
                else np.nan,
            }
        )
    return pd.DataFrame(rows)


def ablation_section(ablation: pd.DataFrame, paper: bool = True) -> str:
    """The ablation tables; `paper` adds the paper's Table 2 (CHILDES) for comparison."""
    table = ablation_table(ablation)
    final = table[table["step"] == table.groupby("model")["step"].transform("max")]
    return "\n".join(
        [
            H.para(
                "Matched surprisal of v<LAN> with the heads zero-ablated (intervention), with as many random heads "
                "from the same layers (control, mean over draws) and with none (original). Means over the runs "
                "that have such heads at that checkpoint; p pools (seed, context) pairs."
            ),
            H.table(final, caption="Last checkpoint", float_format="{:.4f}"),
            *(
                [
                    H.table(
                        PAPER_ABLATION[["step", "intervention", "control", "original"]],
                        caption="Paper (Wu et al., Table 2), aggregate heads, Transformer on CHILDES, for comparison",
                        float_format="{:.2f}",
                    )
                ]
                if paper
                else []
            ),
            "<details><summary>Every checkpoint</summary>" + H.table(table, float_format="{:.4f}") + "</details>",
        ]
    )


def nearest_steps(steps: Sequence[int], fractions: Sequence[float] = TABLE2_FRACTIONS) -> list[int]:
    """The checkpoint steps nearest to each fraction of the last one (ties: the earlier step)."""
    steps = sorted(set(int(s) for s in steps))
    return [min(steps, key=lambda s: (abs(s - f * steps[-1]), s)) for f in fractions]


def table2(heads: pd.DataFrame, saliency: pd.DataFrame, ablation: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 2 at CPU scale, per model at the checkpoints nearest 1/4, 1/2 and all of
    training: aggregate heads (mean over seeds, 0 where a seed has none), their mean layer (0-based,
    over the seeds that have some), and the matched surprisal with them ablated, with as many random
    heads, and with none."""
    found = heads_table(heads, saliency)
    found.columns = [" ".join(str(p) for p in c if p) for c in found.columns]
    abl = ablation_table(ablation[ablation["kind"] == "aggregate"])
    rows = []
    for model, g in abl.groupby("model"):
        for fraction, step in zip(TABLE2_FRACTIONS, nearest_steps(g["step"])):
            a = g[g["step"] == step].iloc[0]
            h = found[(found["model"] == model) & (found["step"] == step)]
            rows.append(
                {
                    "model": model,
                    "fraction": fraction,
                    "step": step,
                    "aggregate heads": float(h["heads (mean over seeds) aggregate"].iloc[0]) if len(h) else 0.0,
                    "mean layer": float(h["mean layer aggregate"].iloc[0]) if len(h) else np.nan,
                    "intervention": a["intervention"],
                    "control": a["control"],
                    "original": a["original"],
                    "p (intervention > control)": a["p (intervention > control)"],
                }
            )
    return pd.DataFrame(rows)


def table2_metrics(heads: pd.DataFrame, saliency: pd.DataFrame, ablation: pd.DataFrame) -> dict:
    """JSON-ready Table 2: model -> fraction of training -> {column: value or None} (two fractions may
    share a checkpoint when there are few)."""
    out: dict = {}
    for r in table2(heads, saliency, ablation).to_dict("records"):
        values = {
            k: (None if pd.isna(v) else round(float(v), 5)) for k, v in r.items() if k not in ("model", "fraction")
        }
        out.setdefault(r["model"], {})[str(r["fraction"])] = values
    return out


def table2_section(heads: pd.DataFrame, saliency: pd.DataFrame, ablation: pd.DataFrame, n_layers: dict) -> str:
    ours = table2(heads, saliency, ablation)
    ours["layers"] = ours["model"].map(n_layers)
    return "\n".join(
        [
            H.para(
                "The paper's Table 2 at CPU scale: per Transformer, the checkpoints nearest 1/4, 1/2 and all of "
                "training (the paper's 5k / 10k / 20k of 20,000 steps). Aggregate heads: mean count over seeds; "
                "mean layer counts from 0 (the paper's base is not stated; its model has 12 layers). Surprisal in "
                "nats, mean over the seeds that have aggregate heads."
            ),
            H.table(ours, caption="Ours", float_format="{:.3f}"),
            H.table(
                PAPER_ABLATION, caption="Paper (Wu et al., Table 2), Transformer on CHILDES", float_format="{:.2f}"
            ),
        ]
    )


def ablation_metrics(ablation: pd.DataFrame) -> dict:
    table = ablation_table(ablation)
    final = table[table["step"] == table.groupby("model")["step"].transform("max")]
    return {
        f"{r['model']}_{r['kind']}": {
            k: (None if pd.isna(r[k]) else round(float(r[k]), 5))
            for k in ("heads (mean)", "original", "intervention", "control", "p (intervention > control)")
        }
        for _, r in final.iterrows()
    }


def llc_section(llc: pd.DataFrame) -> str:
    """The LLC of each run's checkpoints over training (grounding_llc), beside the gain curves above."""
    if llc.empty:
        return H.opt_in("Local learning coefficient", "grounding_llc.models")
    curve = llc_curve(llc, ["model", "seed"])
    name = curve["model"] + " seed " + curve["seed"].astype(str)
    return "\n".join(
        [
            H.para(
                "Local learning coefficient (LLC) of the saved checkpoints of the runs grounding_llc names, by "
                f"devinterp's SGLD estimator on the run's own next-token loss (params llc; "
                f"{int(curve['n_chains'].min())} chains per checkpoint, mean shown): read it beside the gain "
                "curves above, where grounding appears."
            ),
            H.curves(curve.assign(cls=name, value=curve["llc"]), "LLC", "run", "grounding local learning coefficient"),
            H.para(unsettled_note(curve)),
            "<details><summary>Every checkpoint</summary>"
            + H.table(curve, caption="LLC per checkpoint: mean and sd over chains", float_format="{:.4f}")
            + "</details>",
        ]
    )


def llc_metrics(llc: pd.DataFrame) -> dict:
    """grounding.json "llc": per run, the LLC per checkpoint (mean over chains); {} without an estimate."""
    if llc.empty:
        return {}
    curve = llc_curve(llc, ["model", "seed"])
    return {
        f"{m}_seed{int(s)}": {"steps": c["step"].astype(int).tolist(), "llc": c["llc"].round(6).tolist()}
        for (m, s), c in curve.groupby(["model", "seed"])
    }
