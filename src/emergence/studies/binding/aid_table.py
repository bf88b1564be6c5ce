"""The aid variants side by side with the default (aids.py): each run's accuracy, phases and patching
along the chain as tidy rows, the table and metrics those give, and the page's section."""

from __future__ import annotations

import pandas as pd

from emergence.core.io import PipelineError
from emergence.core.report import html as H
from emergence.studies.binding.aids import AIDS
from emergence.studies.binding.report_mechanisms import PATCH_AT, PATCH_AT_TEXT, depth_patching

COLUMNS = ("aid", "seed", "measure", "step", "depth", "position", "value")
DEFAULT = "default"  # the run the variants are compared with (binding_train's own runs)


def aid_rows(
    aid: str, seed: int, trajectory: pd.DataFrame, phases: pd.DataFrame, patching: pd.DataFrame
) -> pd.DataFrame:
    """One run in tidy rows (aid, seed, measure, step, depth, position, value):
    - accuracy: held-out accuracy over every hop class at the last checkpoint (step: that checkpoint);
    - deep_accuracy: the deepest hop class's accuracy at every checkpoint;
    - phase_start: the step each phase (depth: 1-3) starts, -1 if never reached;
    - patch: best-layer patch success at each chain depth >= 1 and position (rhs | newline);
    - patch_pairs: how many counterfactual pairs those are measured over (the ones the run answers
      correctly in both its base and counterfactual program: patching_table's "pairs_correct")."""
    acc = trajectory[trajectory["metric"] == "accuracy"]
    if acc.empty:
        raise PipelineError(f"binding aid {aid}, seed {seed}: no accuracy rows in its trajectory")
    last = int(acc["step"].max())
    deepest = int(acc["hops"].max())
    rows = [
        dict(
            measure="accuracy",
            step=last,
            depth=-1,
            position="",
            value=float(acc.loc[(acc["step"] == last) & (acc["hops"] == -1), "value"].iloc[0]),
        )
    ]
    curve = acc[acc["hops"] == deepest].sort_values("step")
    rows += [
        dict(measure="deep_accuracy", step=int(s), depth=deepest, position="", value=float(v))
        for s, v in zip(curve["step"], curve["value"])
    ]
    rows += [
        dict(measure="phase_start", step=-1, depth=int(p), position="", value=float(s))
        for p, s in zip(phases["phase"], phases["start_step"])
    ]
    for at in PATCH_AT:
        mat = depth_patching(patching, at)
        rows += [
            dict(measure="patch", step=-1, depth=int(d), position=at, value=float(col.max()))
            for d, col in mat.items()
            if d >= 1 and col.notna().any()
        ]
    kept = patching[patching["metric"] == "pairs_correct"]
    if len(kept) != 1:
        raise PipelineError(f"binding aid {aid}, seed {seed}: {len(kept)} pairs_correct rows in its patching, not 1")
    n_pairs = round(float(kept["value"].iloc[0]) * int(kept["n"].iloc[0]))
    rows.append(dict(measure="patch_pairs", step=-1, depth=-1, position="", value=float(n_pairs)))
    return pd.DataFrame(rows).assign(aid=aid, seed=seed)[list(COLUMNS)]


def aids_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per (variant, seed): accuracy, deepest-hop accuracy, phase starts, the pairs patched and the
    best patching per depth."""
    keys = ["aid", "seed"]
    acc = rows[rows["measure"] == "accuracy"].set_index(keys)
    out = pd.DataFrame({"steps": acc["step"], "accuracy": acc["value"]})
    deep = rows[rows["measure"] == "deep_accuracy"]
    out["deepest hop"] = deep.sort_values("step").groupby(keys)["value"].last()
    starts = rows[rows["measure"] == "phase_start"].pivot_table(index=keys, columns="depth", values="value")
    for phase, name in ((2, "heuristic from"), (3, "traversal from")):
        out[name] = starts.get(phase, pd.Series(dtype=float)).astype("Int64")
    out["patch pairs"] = rows[rows["measure"] == "patch_pairs"].set_index(keys)["value"].astype("Int64")
    patch = rows[rows["measure"] == "patch"]
    for at in PATCH_AT:
        cells = patch[patch["position"] == at].pivot_table(index=keys, columns="depth", values="value")
        for d in cells.columns:
            out[f"{at} d{d}"] = cells[d]
    order = {a: i for i, a in enumerate([DEFAULT, *AIDS])}
    return out.reset_index().sort_values(["seed", "aid"], key=lambda c: c.map(order) if c.name == "aid" else c)


def aids_metrics(rows: pd.DataFrame) -> dict:
    """binding.json "aids": per variant, per seed: accuracy, phase starts and the weakest depth's patching
    ({} without a variant)."""
    if rows.empty:
        return {}
    table = aids_table(rows)
    weakest = {at: table.filter(like=f"{at} d").min(axis=1) for at in PATCH_AT}
    return {
        aid: {
            f"seed{int(r.seed)}": {
                "accuracy": float(r.accuracy),
                "traversal_from": None if pd.isna(r["traversal from"]) else int(r["traversal from"]),
                **{f"patch_weakest_depth_{at}": None if pd.isna(w[i]) else float(w[i]) for at, w in weakest.items()},
            }
            for i, r in group.iterrows()
        }
        for aid, group in table.groupby("aid", sort=False)
    }


def aids_section(rows: pd.DataFrame) -> str:
    """The side-by-side: each variant beside the default of the same seed."""
    if rows.empty:
        return H.opt_in("Aid variants", "binding_aids.aids")
    table = aids_table(rows)
    changes = "; ".join(
        f"{aid}: " + ", ".join(f"{k} {v}" for values in AIDS[aid].values() for k, v in values.items())
        for aid in dict.fromkeys(table["aid"]) if aid in AIDS
    )  # fmt: skip
    deep = rows[rows["measure"] == "deep_accuracy"]
    curves = deep.assign(cls=deep["aid"] + " seed" + deep["seed"].astype(str))
    return "\n".join(
        [
            H.para(
                "The default trains with aids the paper's plain GPT-2 does not have: a causal convolution "
                "(Canon layer) and a target at every line's value. Each variant below trains on the same "
                f"distribution, seed and number of steps without them ({changes}). Accuracy: held-out test "
                "programs at the last checkpoint; phases as detected above (-1: never reached); patching: the "
                f"best layer's success at each chain depth, at the {PATCH_AT_TEXT['rhs']} (rhs) and the newline, "
                "over the counterfactual pairs the run answers correctly with and without the change (patch pairs)."
            ),
            H.table(table, caption="Each aid taken away: accuracy, phases and patching by chain depth"),
            H.curves(curves, "deepest hop accuracy", "variant", "deepest hop accuracy over training, per variant"),
        ]
    )  # fmt: skip
