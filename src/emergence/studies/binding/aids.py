"""The default's training aids, taken away one at a time: what each does to the phases, the accuracy and
the patching along the chain.

The default trains with two aids the paper's plain GPT-2 does not have (docs/binding.md): a causal
convolution before attention (a Canon layer, `binding_model.conv_kernel`) and a target at every line's
value (`binding_train.format: line_values`). An aid variant is the run's params with a fixed set of
overrides (AIDS); it trains on the same distribution, seed and budget as the run it is compared with.
"""

from __future__ import annotations

import copy
import dataclasses

import pandas as pd

from emergence.core.io import PipelineError
from emergence.core.report import html as H
from emergence.studies.binding.report_mechanisms import PATCH_AT, PATCH_AT_TEXT, depth_patching

# name -> {params section: overrides}. "plain" is the paper profile's model at the run's size: GPT-2's
# learned positions, tanh GELU and tied embeddings, no conv, the answer as the only target.
AIDS: dict[str, dict[str, dict]] = {
    "no_conv": {"binding_model": {"conv_kernel": 0}},
    "no_line_values": {"binding_train": {"format": "answer_only"}},
    "plain": {
        "binding_model": {"conv_kernel": 0, "pos": "learned", "act": "gelu_tanh", "tie_embeddings": True},
        "binding_train": {"format": "answer_only"},
    },
    "with_aids": {"binding_model": {"conv_kernel": 4}, "binding_train": {"format": "line_values"}},  # paper + both
}
COLUMNS = ("aid", "seed", "measure", "step", "depth", "position", "value")
DEFAULT = "default"  # the run the variants are compared with (binding_train's own runs)


@dataclasses.dataclass
class AidParams:
    """params.yaml binding_aids: the variants (AIDS names) and the seeds each one trains (seeds of base.seeds,
    so the default run of that seed stands beside it)."""

    aids: list[str]
    seeds: list[int]

    def validate(self, where: str) -> None:
        if not self.aids or not self.seeds:
            raise PipelineError(f"{where}: aids and seeds each need at least one entry, got {self.aids}, {self.seeds}")
        unknown = [a for a in self.aids if a not in AIDS]
        if unknown:
            raise PipelineError(f"{where}.aids: {unknown} unknown; the variants are {', '.join(AIDS)}")
        if len(set(self.aids)) < len(self.aids) or len(set(self.seeds)) < len(self.seeds):
            raise PipelineError(f"{where}: a variant or seed is listed twice ({self.aids}, {self.seeds})")


def without_aid(params: dict, aid: str) -> dict:
    """`params` with the sections `aid` overrides replaced (a copy of the same type: a stage's declared
    params stay declared); the rest shared."""
    if aid not in AIDS:
        raise PipelineError(f"binding_aids: no variant {aid!r}; the variants are {', '.join(AIDS)}")
    changed = copy.copy(params)
    for name, values in AIDS[aid].items():
        changed[name] = {**params[name], **values}
    return changed


def aid_rows(
    aid: str, seed: int, trajectory: pd.DataFrame, phases: pd.DataFrame, patching: pd.DataFrame
) -> pd.DataFrame:
    """One run in tidy rows (aid, seed, measure, step, depth, position, value):
    - accuracy: held-out accuracy over every hop class at the last checkpoint (step: that checkpoint);
    - deep_accuracy: the deepest hop class's accuracy at every checkpoint;
    - phase_start: the step each phase (depth: 1-3) starts, -1 if never reached;
    - patch: best-layer patch success at each chain depth >= 1 and position (rhs | newline)."""
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
    return pd.DataFrame(rows).assign(aid=aid, seed=seed)[list(COLUMNS)]


def aids_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per (variant, seed): accuracy, deepest-hop accuracy, phase starts, best patching per depth."""
    keys = ["aid", "seed"]
    acc = rows[rows["measure"] == "accuracy"].set_index(keys)
    out = pd.DataFrame({"steps": acc["step"], "accuracy": acc["value"]})
    deep = rows[rows["measure"] == "deep_accuracy"]
    out["deepest hop"] = deep.sort_values("step").groupby(keys)["value"].last()
    starts = rows[rows["measure"] == "phase_start"].pivot_table(index=keys, columns="depth", values="value")
    for phase, name in ((2, "heuristic from"), (3, "traversal from")):
        out[name] = starts.get(phase, pd.Series(dtype=float)).astype("Int64")
    patch = rows[rows["measure"] == "patch"]
    for at in PATCH_AT:
        cells = patch[patch["position"] == at].pivot_table(index=keys, columns="depth", values="value")
        for d in cells.columns:
            out[f"{at} d{d}"] = cells[d]
    order = {a: i for i, a in enumerate([DEFAULT, *AIDS])}
    return out.reset_index().sort_values(["seed", "aid"], key=lambda c: c.map(order) if c.name == "aid" else c)


def aids_metrics(rows: pd.DataFrame) -> dict:
    """binding.json "aids": per variant, per seed: accuracy, phase starts and the weakest depth's patching."""
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
        return H.para("No aid variants were trained (binding_aids).", "note")
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
                f"best layer's success at each chain depth, at the {PATCH_AT_TEXT['rhs']} (rhs) and the newline."
            ),
            H.table(table, caption="Each aid taken away: accuracy, phases and patching by chain depth"),
            H.curves(curves, "deepest hop accuracy", "variant", "deepest hop accuracy over training, per variant"),
        ]
    )  # fmt: skip
