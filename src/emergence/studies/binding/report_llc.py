"""The binding page's local learning coefficient: the LLC over training beside the detected phases."""

from __future__ import annotations

import pandas as pd

from emergence.core.report import html as H
from emergence.interp.llc import largest_rise, llc_curve, unsettled_note


def llc_phases(llc: pd.DataFrame, phases: pd.DataFrame) -> pd.DataFrame:
    """Per seed: where the heuristic and traversal phases start (-1: never) and between which checkpoints
    the mean LLC rises most."""
    curve = llc_curve(llc, ["seed"])
    rows = []
    for seed, c in curve.groupby("seed"):
        starts = phases[phases["seed"] == seed].set_index("phase")["start_step"]
        rise = largest_rise(c)
        rows.append(
            dict(
                seed=int(seed),
                heuristic_from=int(starts.get(2, -1)),
                traversal_from=int(starts.get(3, -1)),
                llc_rise_from=-1 if rise is None else rise[0],
                llc_rise_to=-1 if rise is None else rise[1],
            )
        )
    return pd.DataFrame(rows)


def llc_metrics(llc: pd.DataFrame, phases: pd.DataFrame) -> dict:
    """binding.json "llc": per seed, the LLC per checkpoint (mean over chains) and its largest rise beside
    the phase starts ({} without an estimate)."""
    if llc.empty:
        return {}
    curve = llc_curve(llc, ["seed"])
    side = llc_phases(llc, phases).set_index("seed")
    return {
        f"seed{int(s)}": {
            "steps": c["step"].astype(int).tolist(),
            "llc": c["llc"].round(6).tolist(),
            **{k: int(v) for k, v in side.loc[s].items()},
        }
        for s, c in curve.groupby("seed")
    }


def llc_section(llc: pd.DataFrame, phases: pd.DataFrame) -> str:
    if llc.empty:
        return H.opt_in("Local learning coefficient", "binding_llc.seeds")
    curve = llc_curve(llc, ["seed"])
    n_chains = int(curve["n_chains"].min())
    return "\n".join(
        [
            H.para(
                "Local learning coefficient (LLC) of the saved checkpoints, by devinterp's SGLD estimator "
                f"(params llc; {n_chains} chains per checkpoint, mean shown, sd over chains in the table): "
                "how many effective directions the loss rises along around the weights. Below it, where "
                "it rises most, beside the phases detected from the accuracy."
            ),
            H.curves(curve.assign(cls="seed " + curve["seed"].astype(str), value=curve["llc"]), "LLC", "seed",
                     "local learning coefficient over training"),
            H.para(unsettled_note(curve)),
            H.table(llc_phases(llc, phases), caption="The LLC's largest rise (between two checkpoints) beside "
                    "the phase starts, per seed (-1: never reached)"),
            "<details><summary>Every checkpoint</summary>"
            + H.table(curve, caption="LLC per checkpoint: mean and sd over chains", float_format="{:.4f}")
            + "</details>",
        ]
    )  # fmt: skip
