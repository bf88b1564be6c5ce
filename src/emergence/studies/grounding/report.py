"""reports/grounding.html: does v<ENV> in the context lower the surprisal of v<LAN>?"""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
import pandas as pd

from emergence.core.report import html as H
from emergence.core.report import interactive
from emergence.core.report.plots import new_figure, plot_style, step_axis
from emergence.studies.grounding.gain import sign_flip_test, word_gains

N_BOOT = 1000  # bootstrap resamples of the words for the curves' 95 % band


def word_band(gains: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the mean over words of G(v)."""
    rng = np.random.default_rng(seed)
    means = gains[rng.integers(0, len(gains), size=(N_BOOT, len(gains)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def gain_by_checkpoint(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model and checkpoint: mean G over words (averaged over seeds), its across-seed spread, a 95 %
    bootstrap band over words, and the one-sided sign-flip p-value of G(v) > 0 over words (G(v)
    averaged over seeds). Rows: one per context (natural) or per template (template G), with word."""
    words = word_gains(rows)
    out = []
    for (model, step), g in words.groupby(["model", "step"]):
        per_seed = g.groupby("seed")["gain"].mean()
        per_word = g.groupby("word")[["gain", "s_matched", "s_mismatched"]].mean()
        low, high = word_band(per_word["gain"].to_numpy())
        out.append(
            {
                "model": model,
                "step": int(step),
                "n_seeds": len(per_seed),
                "n_words": len(per_word),
                "s_matched": per_word["s_matched"].mean(),
                "s_mismatched": per_word["s_mismatched"].mean(),
                "G": per_word["gain"].mean(),
                "G_seed_min": per_seed.min(),
                "G_seed_max": per_seed.max(),
                "G_ci_low": low,
                "G_ci_high": high,
                "p_value": sign_flip_test(per_word["gain"].to_numpy()),
            }
        )
    return pd.DataFrame(out)


def final_table(curve: pd.DataFrame) -> pd.DataFrame:
    last = curve.loc[curve.groupby("model")["step"].idxmax()].copy()
    last["grounded (G > 0, p < 0.01)"] = np.where((last["G"] > 0) & (last["p_value"] < 0.01), "yes", "no")
    return last.reset_index(drop=True)


def grounding_metrics(curve: pd.DataFrame) -> dict:
    return {
        r.model: {
            "step": int(r.step),
            "G": round(float(r.G), 5),
            "p_value": round(float(r.p_value), 5),
            "s_matched": round(float(r.s_matched), 4),
            "s_mismatched": round(float(r.s_mismatched), 4),
        }
        for r in final_table(curve).itertuples()
    }


def plot_table(curve: pd.DataFrame) -> pd.DataFrame:
    """dvc plots: G per checkpoint, one column per architecture."""
    return curve.pivot(index="step", columns="model", values="G").reset_index()


def curves_figure(curve: pd.DataFrame):
    models = sorted(curve["model"].unique())
    with plot_style():
        fig, axes = new_figure(9, 2.6 * len(models), len(models), 2)
        for row, model in zip(axes, models):
            c = curve[curve["model"] == model].sort_values("step")
            row[0].plot(c["step"], c["s_matched"], color="#1a7f37", label="matched v<ENV>")
            row[0].plot(c["step"], c["s_mismatched"], color="#c0392b", label="mismatched u<ENV>")
            row[0].set_ylabel("surprisal of v<LAN> (nats)")
            row[0].set_title(f"{model}: surprisal (mean over words and seeds)")
            row[0].legend()
            row[1].fill_between(
                c["step"], c["G_ci_low"], c["G_ci_high"], color=mpl.colormaps["tab10"](0), alpha=0.25, lw=0,
                label="95 % band over words",
            )  # fmt: skip
            row[1].plot(c["step"], c["G_seed_min"], color="#777", lw=0.8, ls=":", label="seed min / max")
            row[1].plot(c["step"], c["G_seed_max"], color="#777", lw=0.8, ls=":")
            row[1].plot(c["step"], c["G"], color=mpl.colormaps["tab10"](0), label="G (mean over seeds)")
            row[1].axhline(0, color="#555", lw=0.8)
            row[1].set_ylabel("grounding gain G (nats)")
            row[1].set_title(f"{model}: G over training")
            row[1].legend()
            for ax in row:
                step_axis(ax, c["step"])
    return fig


def targets_part(candidates: pd.DataFrame, source: str) -> str:
    """How the targets were chosen from the candidate noun list (tokens.target_vocabulary's table), and
    the targets' counts."""
    passing, chosen = int(candidates["passes"].sum()), candidates[candidates["target"]]
    return "\n".join(
        [
            H.para(
                f"Targets: {passing} of the {len(candidates)} candidate nouns have both forms at least "
                f"min_count times in the {source}; the {len(chosen)} whose rarer form is most frequent are "
                "the targets (the paper: 100 CDI nouns with at least 100 of each form)."
            ),
            H.table(
                chosen[["word", "n_env", "n_lan"]],
                caption=f"Target nouns: occurrences of each form in the {source}",
            ),
        ]
    )


def _data_section(counts: dict, targets: pd.DataFrame, eval_set: pd.DataFrame) -> str:
    summary = pd.DataFrame(sorted((k, str(v)) for k, v in counts.items()), columns=["quantity", "value"])
    examples = eval_set.groupby("word").head(1).head(6)
    examples = pd.DataFrame(
        {"word": examples["word"], "context": examples["context"].map(" ".join), "target": examples["word"] + "<LAN>"}
    )
    silent = counts.get("files_without_child", 0)
    warning = (
        [
            H.para(
                f"Warning: {silent} of the {counts.get('files')} transcripts have no child speech (no *CHI: line): "
                "check that they are the transcripts meant, and that the child is coded CHI.",
                "bad",
            )
        ]
        if silent
        else []
    )
    return "\n".join(
        [
            *warning,
            H.table(summary, caption="Extracted transcripts"),
            targets_part(targets, "transcripts"),
            H.para(
                f"{len(eval_set)} held-out evaluation contexts (turns where v<ENV> precedes v<LAN>); "
                "they are removed from training. Mismatched contexts swap v<ENV> for another target's u<ENV>."
            ),
            H.table(examples, caption="Example contexts (matched)"),
        ]
    )


FINAL_COLUMNS = [
    "model",
    "step",
    "n_seeds",
    "n_words",
    "s_matched",
    "s_mismatched",
    "G",
    "G_seed_min",
    "G_seed_max",
    "p_value",
    "grounded (G > 0, p < 0.01)",
]
TEXT_GAIN = "G(v) = mean over contexts and mismatches of s(v<LAN> | u<ENV>) - s(v<LAN> | v<ENV>)"
TEMPLATE_GAIN = (
    "G(v) = mean over templates and over every other target u != v of s(v<LAN> | u<ENV>) - s(v<LAN> | v<ENV>), "
    "the paper's definition on held-out carrier templates"
)


def seed_table(natural: pd.DataFrame, template: pd.DataFrame) -> pd.DataFrame:
    """Per model and seed at its last checkpoint: natural-turn G and template G (mean over words)."""

    def last(rows: pd.DataFrame, name: str) -> pd.Series:
        words = word_gains(rows)
        words = words[words["step"] == words.groupby(["model", "seed"])["step"].transform("max")]
        return words.groupby(["model", "seed"])["gain"].mean().rename(name)

    return pd.concat([last(template, "template G"), last(natural, "natural G")], axis=1).reset_index()


def gain_section(
    curve: pd.DataFrame,
    columns: list[str] = FINAL_COLUMNS,
    rule: str = TEXT_GAIN,
    by: str = "architecture",
    name: str = "natural-turn gain",
) -> str:
    """Gain curves per `by` (architecture; setting), the final checkpoint's `columns`, every checkpoint;
    `name` tells this section's interactive plot from the page's others."""
    return "\n".join(
        [
            H.para(f"{rule}; p: one-sided sign-flip test over words of G(v) > 0, G(v) averaged over seeds."),
            H.figure(curves_figure(curve), f"surprisal and grounding gain over training per {by}"),
            interactive.lines(
                curve.assign(cls=curve["model"], value=curve["G"]), f"{name} per {by}", "grounding gain G (nats)", by
            ),
            H.table(final_table(curve)[columns], caption="Final checkpoint", float_format="{:.4f}"),
            "<details><summary>Every checkpoint</summary>"
            + H.table(curve.drop(columns=["n_seeds", "n_words"]), float_format="{:.4f}")
            + "</details>",
        ]
    )


def template_section(templates: pd.DataFrame, curve: pd.DataFrame, seed_gains: pd.DataFrame) -> str:
    per_template = templates.groupby("template", sort=True).first()
    shown = pd.DataFrame(
        {
            "template": per_template.index,
            "context (first target)": per_template["context"].map(" ".join),
            "<unk> tokens": per_template["n_unk"],
            "source": per_template["source"],
        }
    )
    return "\n".join(
        [
            H.para(
                f"{len(per_template)} carrier templates, held out of training (the templates stage refuses one "
                "whose context occurs in the training turns), each read with every target in its environment "
                "slot; the model predicts v<LAN> right after the speech frame."
            ),
            gain_section(curve, rule=TEMPLATE_GAIN, name="template gain"),
            H.table(seed_gains, caption="G per architecture and seed, last checkpoint", float_format="{:.4f}"),
            "<details><summary>Templates</summary>" + H.table(shown) + "</details>",
        ]
    )


def rule_section(rules: pd.DataFrame, run: str) -> str:
    return "\n".join(
        [
            H.para(
                f"{run}, trained twice with the same targets, held-out turns, templates and settings: under the "
                "paper's rule (only the target nouns have <ENV>/<LAN> forms) and with every environment-tier "
                "word marked w<ENV> and every spoken word w<LAN> (env_marking: all, the rule this project used "
                "before). Mean G(v) over words at the last checkpoint."
            ),
            H.table(rules, caption="G under each word rule", float_format="{:.4f}"),
        ]
    )


def grounding_page(
    counts: dict,
    targets: pd.DataFrame,
    eval_set: pd.DataFrame,
    curve: pd.DataFrame,
    mechanisms: list[tuple[str, str]],
    provenance: dict,
    env_marking: str,
    templates: pd.DataFrame,
    template_curve: pd.DataFrame,
    seed_gains: pd.DataFrame,
    rules: tuple[pd.DataFrame, str],
    plotly_src: str = interactive.BUNDLE,
) -> str:
    """The page: data, gain curves (template G, natural G), the word-rule ablation (its table and which
    run), then the mechanistic sections (title, html); plotly.js loaded from `plotly_src`."""
    sections = [
        ("Data", _data_section(counts, targets, eval_set)),
        ("Template grounding: every mismatch", template_section(templates, template_curve, seed_gains)),
        ("Natural-turn grounding", gain_section(curve)),
        ("Word rule: target nouns only, or every word (ablation)", rule_section(*rules)),
        *mechanisms,
        ("Provenance", H.provenance_block(provenance)),
    ]
    rule = (
        "Target nouns appear as environment tokens (v<ENV>, from %act/%sit/%gpx tiers) and as speech tokens "
        "(v<LAN>); every other word is one plain token shared by both channels, as in the paper's example "
        "(env_marking: targets)."
        if env_marking == "targets"
        else "Every word of an environment tier is an environment token (w<ENV>) and every spoken word a speech "
        "token (w<LAN>): env_marking: all, our ablation; the paper marks only the target nouns."
    )
    intro = (
        f"{rule} A model is grounded when v<ENV> in the context makes v<LAN> less surprising than "
        "another word's u<ENV> does (Wu et al., arXiv 2510.13796)."
    )
    return H.page("Symbol grounding from child-directed speech", sections, intro=intro, plotly_src=plotly_src)
