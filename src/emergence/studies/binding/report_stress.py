"""The binding report's stress-suite section and metrics (tables from the binding_stress stage)."""

from __future__ import annotations

import pandas as pd

from emergence.core.report import html as H
from emergence.core.report import plots
from emergence.studies.binding.stress import REFERENCE, STRESS

STRESS_SETS = [f"stress_{name}" for name in STRESS]
REFERENCE_SETS = [f"ref_{name}" for name in REFERENCE]


def _per_seed(rows: pd.DataFrame) -> pd.Series:
    """Accuracy per seed, pooled over the rows' cells (correct / n)."""
    sums = rows.groupby("seed")[["correct", "n"]].sum()
    return sums["correct"] / sums["n"]


def _set_metrics(stress: pd.DataFrame, sets: list[str], prefix: str) -> dict:
    """Per set: accuracy per seed overall and per hop count."""
    return {
        name.removeprefix(prefix): {
            "per_seed": {str(s): round(float(v), 6) for s, v in _per_seed(rows).items()},
            "by_hops": {
                str(h): {str(s): round(float(v), 6) for s, v in _per_seed(g).items()} for h, g in rows.groupby("hops")
            },
        }
        for name, rows in stress[stress["set"].isin(sets)].groupby("set")
    }


def named(stress: pd.DataFrame) -> pd.DataFrame:
    """The rows of the checkpoint binding_stress.checkpoint names (the others are the curve's)."""
    return stress[stress["named"]]


def stress_metrics(stress: pd.DataFrame) -> dict:
    """At the named checkpoint, per stress set (and under `reference`, per generator unpinned): accuracy
    per seed overall and per hop count; the weakest stress set; and under `curve`, per seed and scored
    step, the weakest stress set's accuracy."""
    curve = frontier(stress)
    stress = named(stress)
    out = _set_metrics(stress, STRESS_SETS, "stress_")
    if out:
        worst = min(out, key=lambda k: min(out[k]["per_seed"].values()))
        out["weakest"] = {"set": worst, "min_seed_accuracy": min(out[worst]["per_seed"].values())}
    reference = _set_metrics(stress, REFERENCE_SETS, "ref_")
    if reference:
        out["reference"] = reference
    if curve["step"].nunique() > 1:
        weakest = curve[curve["cls"].str.endswith("weakest stress set")]
        out["curve"] = {
            str(seed): {str(step): round(float(v), 6) for step, v in zip(g["step"], g["value"])}
            for seed, g in weakest.groupby("seed")
        }
    return out


def frontier(stress: pd.DataFrame) -> pd.DataFrame:
    """Per seed and scored step: the weakest stress set's accuracy and each generator's unpinned one.
    Columns seed, step, cls, value (lines_by_class)."""
    rows = stress[stress["set"].isin(STRESS_SETS + REFERENCE_SETS)]
    sums = rows.groupby(["seed", "step", "set"])[["correct", "n"]].sum()
    acc = (sums["correct"] / sums["n"]).rename("value").reset_index()
    is_stress = acc["set"].isin(STRESS_SETS)
    weakest = acc[is_stress].groupby(["seed", "step"], as_index=False)["value"].min().assign(set="weakest stress set")
    out = pd.concat([weakest, acc[~is_stress]], ignore_index=True)
    out["cls"] = [f"seed {seed}: {_label(s)}" for seed, s in zip(out["seed"], out["set"])]
    return out[["seed", "step", "cls", "value"]].sort_values(["cls", "step"], ignore_index=True)


def frontier_section(stress: pd.DataFrame) -> str:
    """Stress accuracy against training: the frontier when the target is not met."""
    curve = frontier(stress)
    if curve["step"].nunique() < 2:
        return H.para("Only one checkpoint was scored (binding_stress.curve_every is 0).", "note")
    table = curve.pivot_table(index="step", columns="cls", values="value")
    return "\n".join(
        [
            H.para(
                "The stress suite scored at every checkpoint binding_stress.curve_every names: per seed, the "
                "weakest stress set and each generator unpinned (docs/binding.md gives the minutes per step)."
            ),
            H.curves(curve, "accuracy", "seed: set", "stress accuracy against training"),
            H.table(table.reset_index()),
        ]
    )


def stress_section(stress: pd.DataFrame) -> str:
    rows = named(stress)
    rows = rows[rows["set"].isin(STRESS_SETS + REFERENCE_SETS)]
    if rows.empty:
        return H.para("No stress-suite programs (binding_data.stress_per_hop is 0).", "note")
    sums = rows.groupby(["set", "hops", "seed"])[["correct", "n"]].sum()
    acc = (sums["correct"] / sums["n"]).rename("accuracy").reset_index()
    mean = acc.pivot_table(index="set", columns="hops", values="accuracy", aggfunc="mean")
    mean = mean.reindex([s for s in STRESS_SETS + REFERENCE_SETS if s in mean.index])  # stress sets first
    mean["all"] = [_per_seed(rows[rows["set"] == s]).mean() for s in mean.index]
    mean["worst seed"] = [_per_seed(rows[rows["set"] == s]).min() for s in mean.index]
    mean.index = [_label(s) for s in mean.index]
    mean.columns = [f"{c} hops" if isinstance(c, int) else c for c in mean.columns]
    return "\n".join(
        [
            H.para(
                "Each stress distribution is the paper distribution with one property pushed beyond what "
                "training shows (docs/binding.md lists them); the last rows are each generator with nothing "
                "pinned (paper, balanced), whichever one trained. Hops uniform, labels from the independent "
                "interpreter. Accuracy of the checkpoint binding_stress.checkpoint names, mean over seeds per "
                "hop count; `all` pools the hop classes, `worst seed` is the lowest seed's."
            ),
            H.table(mean.rename_axis("distribution").reset_index()),
            H.figure(plots.heatmap(mean.drop(columns=["all", "worst seed"]), "stress accuracy"), "stress heat map"),
            H.para("The same per seed."),
            H.table(_per_seed_table(rows, acc)),
        ]
    )


def _per_seed_table(rows: pd.DataFrame, acc: pd.DataFrame) -> pd.DataFrame:
    """One row per (distribution, seed): accuracy per hop count and pooled (`all`)."""
    table = acc.pivot_table(index=["set", "seed"], columns="hops", values="accuracy")
    sums = rows.groupby(["set", "seed"])[["correct", "n"]].sum()
    table["all"] = sums["correct"] / sums["n"]
    order = {s: i for i, s in enumerate(STRESS_SETS + REFERENCE_SETS)}
    table = table.reset_index().sort_values(["set", "seed"], key=lambda c: c.map(order) if c.name == "set" else c)
    table["set"] = table["set"].map(_label)
    table.columns = [f"{c} hops" if isinstance(c, int) else c for c in table.columns]
    return table.rename(columns={"set": "distribution"})


def _label(name: str) -> str:
    """`stress_few_vars` -> `few_vars`; `ref_paper` -> `paper (generator, unpinned)`."""
    if name.startswith("ref_"):
        return f"{name.removeprefix('ref_')} (generator, unpinned)"
    return name.removeprefix("stress_")
