"""The variable-binding report: HTML page, DVC metrics dict and DVC plot table.

Pure functions of the tidy analysis tables (per-seed files already
concatenated by the stage). "Held-out" numbers come from the final-checkpoint
predictions on the main test split; the generalisation set is reported apart.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from emergence.core.report import html as H
from emergence.core.report import plots
from emergence.core.report.interactive import BUNDLE
from emergence.studies.binding.aid_table import aids_section
from emergence.studies.binding.report_llc import llc_section
from emergence.studies.binding.report_mechanisms import (
    ablation_section,
    depth_section,
    hop_heads_section,
    patching_section,
    step_heads_section,
)
from emergence.studies.binding.report_stress import frontier_section, stress_metrics, stress_section

PHASES = ("random", "heuristic", "traversal")
# The paper's phases, as the summary we have gives them: step ranges and accuracy.
PAPER_PHASES = {"random": "0-800 (12 %)", "heuristic": "1,200-14,000 (56 %)", "traversal": "34,000-105,400 (99.9 %)"}
CHANCE = 0.10


# ---------------------------------------------------------------- aggregation


def _stats(per_seed: pd.Series) -> dict:
    """mean, sample sd (None for one seed) and the per-seed values of a seed-indexed series."""
    return {
        "mean": float(per_seed.mean()) if len(per_seed) else None,
        "sd": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else None,
        "per_seed": {str(s): float(v) for s, v in per_seed.sort_index().items()},
    }


def _main_test(predictions: pd.DataFrame) -> pd.DataFrame:
    return predictions[(predictions["set"] == "main") & (predictions["split"] == "test")]


def _seed_accuracy(df: pd.DataFrame) -> pd.Series:
    return df.groupby("seed")["correct"].mean()


def _last_steps(trajectory: pd.DataFrame) -> pd.Series:
    return trajectory.groupby("seed")["step"].max()


def _diverged(trajectory: pd.DataFrame) -> dict[str, int]:
    """seed -> the first step whose training loss was nan or inf (seeds that stayed finite: absent)."""
    rows = trajectory[trajectory["metric"] == "diverged_at"]
    return {str(s): int(step) for s, step in zip(rows["seed"], rows["step"])}


def _agreement(trajectory: pd.DataFrame, kind: str = "agree") -> pd.DataFrame:
    """Overall `agree_*` (or `follow_*`) rows, with the heuristic's name in a `heuristic` column."""
    t = trajectory[(trajectory["hops"] == -1) & trajectory["metric"].str.startswith(f"{kind}_")]
    return t.assign(heuristic=t["metric"].str.removeprefix(f"{kind}_"))


def _final_agreement(trajectory: pd.DataFrame, kind: str = "agree") -> pd.DataFrame:
    """seed, heuristic, value: each heuristic's agreement (or following) at the seed's last step."""
    agree = _agreement(trajectory, kind)
    last = agree["seed"].map(_last_steps(trajectory))
    return agree[agree["step"] == last][["seed", "heuristic", "value"]]


def phase_bands(phases: pd.DataFrame, trajectory: pd.DataFrame) -> pd.DataFrame:
    """seed, name, start, end, detail, reached for every seed x phase; end -1 resolves to the last step.

    A phase missing from the table or with start_step -1 is `reached=False` with NaN start/end.
    """
    last = _last_steps(trajectory)
    grid = pd.MultiIndex.from_product([sorted(last.index), PHASES], names=["seed", "name"]).to_frame(index=False)
    out = grid.merge(phases[["seed", "name", "start_step", "end_step", "detail"]], on=["seed", "name"], how="left")
    reached = out["start_step"].fillna(-1) >= 0
    end = out["end_step"].where(out["end_step"] != -1, out["seed"].map(last))
    return pd.DataFrame(
        {
            "seed": out["seed"],
            "name": out["name"],
            "start": out["start_step"].where(reached),
            "end": end.where(reached),
            "detail": out["detail"].fillna(""),
            "reached": reached,
        }
    )


def _clean(obj):
    """JSON-ready copy: keys sorted, floats rounded to 6 digits, NaN -> None."""
    if isinstance(obj, dict):
        return {str(k): _clean(obj[k]) for k in sorted(obj, key=str)}
    if isinstance(obj, (float, np.floating)):
        return None if math.isnan(obj) else round(float(obj), 6)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def binding_metrics(
    trajectory: pd.DataFrame,
    predictions: pd.DataFrame,
    heuristics: pd.DataFrame,
    phases: pd.DataFrame,
    stress: pd.DataFrame,
) -> dict:
    """Headline numbers for reports/metrics/binding.json (see module docstring for the sources)."""
    test = _main_test(predictions)
    deepest = int(test["hops"].max())
    agree = _final_agreement(trajectory)
    best = heuristics.sort_values(["match_rate", "heuristic"], ascending=[False, True]).iloc[0]
    bands = phase_bands(phases, trajectory)
    return _clean(
        {
            "accuracy": _stats(_seed_accuracy(test)),
            "accuracy_by_hops": {k: _stats(_seed_accuracy(g)) for k, g in test.groupby("hops")},
            "accuracy_deepest": {"hops": deepest, **_stats(_seed_accuracy(test[test["hops"] == deepest]))},
            "generalisation_accuracy": _stats(_seed_accuracy(predictions[predictions["set"] == "gen"])),
            "stress": stress_metrics(stress),
            "heuristic_agreement": {h: _stats(g.set_index("seed")["value"]) for h, g in agree.groupby("heuristic")},
            "best_heuristic": {"name": best["heuristic"], "match_rate": float(best["match_rate"])},
            "final_step": {s: int(v) for s, v in _last_steps(trajectory).items()},
            "diverged_at": _diverged(trajectory),
            "n_test_programs": int(test.groupby("seed").size().max()),
            "phases": {
                str(s): {
                    b.name: {
                        "reached": bool(b.reached),
                        "start_step": None if not b.reached else int(b.start),
                        "end_step": None if not b.reached else int(b.end),
                    }
                    for b in g.itertuples()
                }
                for s, g in bands.groupby("seed")
            },
        }
    )


def binding_plot_table(trajectory: pd.DataFrame) -> pd.DataFrame:
    """One row per step: mean accuracy over seeds overall (`accuracy`) and per hop class
    (`accuracy_hops{k}`), and each seed's overall accuracy (`accuracy_seed{s}`)."""
    acc = trajectory[trajectory["metric"] == "accuracy"]
    by_hops = acc.pivot_table(index="step", columns="hops", values="value", aggfunc="mean")
    by_seed = acc[acc["hops"] == -1].pivot_table(index="step", columns="seed", values="value", aggfunc="mean")
    cols = {"accuracy": by_hops[-1]}
    cols |= {f"accuracy_hops{k}": by_hops[k] for k in by_hops.columns if k >= 0}
    cols |= {f"accuracy_seed{s}": by_seed[s] for s in by_seed.columns}
    out = pd.DataFrame(cols).round(6)
    return out.rename_axis("step").reset_index()


# ---------------------------------------------------------------- page sections


def _fmt(stats: dict) -> str:
    if stats["mean"] is None:
        return "n/a"
    return f"{stats['mean']:.3f}" + ("" if stats["sd"] is None else f" ± {stats['sd']:.3f}")


def _headline(m: dict) -> str:
    rows = [
        ("held-out test accuracy (all hops)", m["accuracy"]),
        (f"held-out test accuracy, deepest class ({m['accuracy_deepest']['hops']} hops)", m["accuracy_deepest"]),
        ("generalisation-set accuracy", m["generalisation_accuracy"]),
    ]
    best = m["best_heuristic"]
    df = pd.DataFrame(
        {
            "quantity": [r for r, _ in rows],
            "mean ± sd over seeds": [_fmt(s) for _, s in rows],
            "per seed": [", ".join(f"{k}: {v:.3f}" for k, v in s["per_seed"].items()) for _, s in rows],
        }
    )
    df.loc[len(df)] = [f"best heuristic ({best['name']}), training match rate", f"{best['match_rate']:.3f}", ""]
    diverged = [
        H.para(
            f"Seed {seed}: training diverged at step {step} (the loss was nan or inf and training went on, "
            "binding_train.on_nonfinite: continue); its numbers describe a broken model."
        )
        for seed, step in m["diverged_at"].items()
    ]
    return "\n".join(
        [
            *diverged,
            H.para(
                f"Final-checkpoint accuracy of the model on {m['n_test_programs']} held-out test programs "
                f"per seed, against the best shortcut heuristic: {best['name']} matches the answer on "
                f"{best['match_rate']:.3f} of training programs (chance {CHANCE:.2f})."
            ),
            H.table(df),
        ]
    )


def _data_section(programs: pd.DataFrame) -> str:
    main = programs[programs["set"] == "main"]
    counts = main.pivot_table(index="split", columns="hops", values="answer", aggfunc="size", fill_value=0)
    counts.columns = [f"{k} hops" for k in counts.columns]
    gen = programs[programs["set"] == "gen"]
    return "\n".join(
        [
            H.para(
                "Main-distribution programs per split and hop count (hops = copies between the constant "
                "and the query). The generalisation set spans other lengths and depths."
            ),
            H.table(counts.reset_index()),
            H.para(
                f"Generalisation set: {len(gen)} programs, {gen['n_lines'].min()}-{gen['n_lines'].max()} lines, "
                f"{gen['hops'].min()}-{gen['hops'].max()} hops."
                if len(gen)
                else "No generalisation set."
            ),
        ]
    )


def _trajectory_section(trajectory: pd.DataFrame, phases: pd.DataFrame) -> str:
    acc = trajectory[(trajectory["metric"] == "accuracy") & (trajectory["hops"] == -1)]
    agree = _agreement(trajectory, "follow")
    bands = phase_bands(phases, trajectory)
    missing = bands[~bands["reached"]]
    notes = [
        H.para(
            f"Seed {b.seed}: the {b.name} phase was not reached within {int(_last_steps(trajectory)[b.seed])} steps.",
            "note",
        )
        for b in missing.itertuples()
    ]
    shown = bands.assign(start=bands["start"].astype("Int64"), end=bands["end"].astype("Int64"))
    return "\n".join(
        [
            H.para(
                "Held-out accuracy (black) and how often the model gives each heuristic's guess where that "
                "guess is wrong (dashed: the heuristic is followed), per seed. Shaded bands are the detected "
                "phases: random (near chance), heuristic (a shortcut is followed) and traversal (deep chains "
                "solved). Dotted line: chance. The paper's phases (summary we have): random 0-800, heuristic "
                "1,200-14,000 (~56 % accuracy), traversal 34,000-105,400 steps (99.9 %)."
            ),
            H.figure(
                plots.trajectory(acc, agree, bands[bands["reached"]]), "accuracy and heuristic agreement over training"
            ),
            H.table(
                shown.assign(paper=shown["name"].map(PAPER_PHASES))[
                    ["seed", "name", "start", "end", "detail", "paper"]
                ],
                caption="Phases (step ranges), beside the paper's (steps, accuracy)",
            ),
            *notes,
        ]
    )


def _hops_section(trajectory: pd.DataFrame, predictions: pd.DataFrame) -> str:
    acc = trajectory[(trajectory["metric"] == "accuracy") & (trajectory["hops"] >= 0)]
    curve = acc.groupby(["step", "hops"], as_index=False)["value"].mean().rename(columns={"hops": "cls"})
    per_seed = _main_test(predictions).groupby(["hops", "seed"])["correct"].mean()
    final = per_seed.groupby("hops").agg(["mean", "std"]).reset_index()
    final.columns = ["label", "mean", "sd"]
    return "\n".join(
        [
            H.para(
                "Accuracy per hop class over training (mean over seeds): binding by traversal predicts "
                "shallow chains are solved first. Below: the final checkpoint on the test split, mean ± sd over seeds."
            ),
            H.curves(curve, "accuracy", "hops", "accuracy per hop class over training"),
            H.figure(plots.bars(final, "hops", "test accuracy", CHANCE), "final accuracy per hop class"),
        ]
    )


def _generalisation_section(predictions: pd.DataFrame) -> str:
    gen = predictions[predictions["set"] == "gen"]
    if gen.empty:
        return H.para("No generalisation-set predictions.", "note")
    mat = gen.pivot_table(index="n_lines", columns="hops", values="correct", aggfunc="mean")
    return "\n".join(
        [
            H.para(
                "Accuracy on the generalisation set by program length and chain depth, pooled over seeds; "
                "cells outside the training range test length and depth generalisation. Blank: no programs."
            ),
            H.figure(plots.heatmap(mat, "generalisation accuracy"), "generalisation accuracy heat map"),
        ]
    )


def _heuristic_section(programs: pd.DataFrame, heuristics: pd.DataFrame, trajectory: pd.DataFrame) -> str:
    test = programs[(programs["set"] == "main") & (programs["split"] == "test")]
    agree = _final_agreement(trajectory).groupby("heuristic")["value"].mean()
    df = heuristics[["heuristic", "match_rate", "n"]].rename(columns={"match_rate": "train match rate"})
    df["chance"] = CHANCE
    df["test match rate"] = [float((test[f"heur_{h}"] == test["answer"]).mean()) for h in df["heuristic"]]
    df["final agreement with model"] = df["heuristic"].map(agree)
    df["final following"] = df["heuristic"].map(
        _final_agreement(trajectory, "follow").groupby("heuristic")["value"].mean()
    )
    return "\n".join(
        [
            H.para(
                "Cheap shortcuts that guess the answer from surface features. The balanced generator keeps "
                "each at chance on the training distribution; the paper generator leaves them at their natural "
                "rates (`first_constant` is the line-1 heuristic). 'Final agreement' is how often the final "
                "model's answer equals the heuristic's; 'final following' is the same on the programs where the "
                "heuristic is wrong, which a model that binds keeps near 0 (means over seeds)."
            ),
            H.table(df),
        ]
    )


def _examples_section(predictions: pd.DataFrame, n: int) -> str:
    """Up to n programs from the first seed, spread over hop classes, alternating wrong and right."""
    test = _main_test(predictions)
    if test.empty or n <= 0:
        return H.para("No examples.", "note")
    d = test[test["seed"] == test["seed"].min()].sort_values(["hops", "correct", "program_id"])
    order = d.groupby(["hops", "correct"]).cumcount() * 2 + d["correct"].astype(int)
    picked = d.assign(order=order).sort_values(["order", "hops", "program_id"]).head(n)
    cards = []
    for r in picked.sort_values(["hops", "program_id"]).itertuples():
        mark = H.span("✓ correct", "ok") if r.correct else H.span("✗ wrong", "bad")
        cards.append(
            f"<figure>{H.pre(r.program)}<figcaption>{H.esc(f'{r.hops} hops · answer {r.answer} · predicted {r.pred}')} "
            f"{mark}</figcaption></figure>"
        )
    return (
        H.para(f"Test programs with the final model's prediction (seed {d['seed'].iloc[0]}).")
        + '<div class="examples">'
        + "".join(cards)
        + "</div>"
    )


def binding_page(
    programs: pd.DataFrame,
    heuristics: pd.DataFrame,
    trajectory: pd.DataFrame,
    phases: pd.DataFrame,
    predictions: pd.DataFrame,
    patching: pd.DataFrame,
    ablation: pd.DataFrame,
    routing: pd.DataFrame,
    stress: pd.DataFrame,
    aids: pd.DataFrame,
    llc: pd.DataFrame,
    provenance: dict,
    n_examples: int = 8,
    plotly_src: str = BUNDLE,
) -> str:
    """The full HTML page of the binding study (plotly.js loaded from `plotly_src`)."""
    m = binding_metrics(trajectory, predictions, heuristics, phases, stress)
    return H.page(
        "Variable binding",
        [
            ("Headline numbers", _headline(m)),
            ("Data", _data_section(programs)),
            ("Training trajectory and phases", _trajectory_section(trajectory, phases)),
            ("Local learning coefficient", llc_section(llc, phases)),
            ("Accuracy by hop count", _hops_section(trajectory, predictions)),
            ("Generalisation", _generalisation_section(predictions)),
            ("Stress suite", stress_section(stress)),
            ("Stress accuracy against training", frontier_section(stress)),
            ("Shortcut heuristics", _heuristic_section(programs, heuristics, trajectory)),
            ("Activation patching", patching_section(patching)),
            ("Patching by chain depth", depth_section(patching)),
            ("Head ablation and routing heads", ablation_section(ablation, routing)),
            ("Heads per hop", hop_heads_section(ablation)),
            ("Heads per dereference step", step_heads_section(patching)),
            ("Training aids taken away", aids_section(aids)),
            ("Example programs", _examples_section(predictions, n_examples)),
            ("Provenance", H.provenance_block(provenance)),
        ],
        intro="A small GPT-style model learns to resolve chains of variable assignments "
        "(Wu, Geiger & Milliere, arXiv 2505.20896). This page is generated by the binding_report stage.",
        plotly_src=plotly_src,
    )
