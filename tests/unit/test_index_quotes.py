"""Which paper row and which of our checkpoints the index quotes.

The paper's rows differ (Table 2 of the grounding paper at 5k / 10k / 20k steps; the association
paper's three weights), and so do our checkpoints and runs, so quoting the wrong row, column,
weight, checkpoint or run gives another number. The paper's values are read here from our text
of the papers (../shared/papers), not from the project's constants."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED

from emergence.claims import CLAIMS, FIGURES, deepest, min_cosine, output_removal_margin
from emergence.core.report.claims import FAIL, PASS, verdict
from emergence.core.report.index import Study, index_page
from emergence.core.report.provenance import stage_times
from emergence.studies.assoc.report import PAPER_MIN_COSINE
from emergence.studies.grounding.report import grounding_metrics
from emergence.studies.grounding.report_mech import PAPER_ABLATION, ablation_metrics


@pytest.fixture(scope="module")
def papers() -> str:
    texts = sorted((SHARED / "papers").glob("*.txt"))
    if not texts:
        pytest.fail(f"{SHARED / 'papers'} has no paper texts")
    return "\n".join(p.read_text(encoding="utf-8") for p in texts)


def table2_rows(papers: str) -> dict[int, dict[str, float]]:
    """The grounding paper's Table 2 as extracted ("200006.717.525.62***4.764.77": step, aggregate
    heads, mean layer, intervention, ***, control, original), one row per step."""
    rows = {}
    for step in (5000, 10000, 20000):
        m = re.search(rf"^{step}(\d\.\d\d)(\d\.\d\d)(\d\.\d\d)\*+(\d\.\d\d)(\d\.\d\d)$", papers, re.M)
        assert m, f"Table 2 row {step} not found in our text"
        heads, layer, inter, ctrl, orig = map(float, m.groups())
        rows[step] = {"aggregate heads": heads, "mean layer": layer, "intervention": inter, "control": ctrl,
                      "original": orig}  # fmt: skip
    return rows


def test_paper_table2_constant_is_the_papers_table(papers):
    rows = table2_rows(papers)
    assert len({r["original"] for r in rows.values()}) == 3  # the rows differ: a wrong row shows
    for _, r in PAPER_ABLATION.iterrows():
        assert {k: r[k] for k in rows[int(r["step"])]} == pytest.approx(rows[int(r["step"])])


def figure(label: str):
    (f,) = [f for f in FIGURES if f.label == label]
    return f


def test_grounding_figures_quote_the_20k_row_and_the_right_column(papers):
    final = table2_rows(papers)[20000]
    assert figure("aggregate heads (mean over seeds), last checkpoint").paper.startswith(
        f"{final['aggregate heads']} at 20k steps"
    )
    for key, label in [("original", "unablated"), ("intervention", "aggregate heads zeroed"),
                       ("control", "random heads zeroed")]:  # fmt: skip
        assert figure(f"matched surprisal, {label}").paper == f"{final[key]:.2f} at 20k steps (Table 2)", key


def test_assoc_figures_quote_each_weights_own_cosine(papers):
    m = re.search(r"Attention (0\.\d+) Value (0\.\d+) Output (0\.\d+)", papers)
    paper = {"W": m.group(1), "V": m.group(2), "W_O": m.group(3)}
    assert {w: f"{v:.6f}" for w, v in PAPER_MIN_COSINE["bpe"].items()} == paper
    for w, v in paper.items():
        quoted, rest = figure(f"min cosine of {w}, learned vs theory (deepest run)").paper.split(" ", 1)
        assert float(quoted) == float(v) and rest.startswith("(its Table 2"), w  # 0.998800 is shown as 0.9988


def test_deepest_runs_compare_layer_counts_as_numbers():
    names = ["L3_seed0", "L12_seed0", "L12_seed1", "L2_seed9", "notarun"]
    assert deepest(names) == ["L12_seed0", "L12_seed1"]
    runs = {"L3_seed0": {"W0": 0.1, "W_O": 0.1}, "L12_seed0": {"W0": 0.7, "W11": 0.6, "W_O": 0.9},
            "L12_seed1": {"W0": 0.65, "W_O": 0.95}}  # fmt: skip
    assert min_cosine("W")({"min_cosine": runs}) == 0.6
    assert min_cosine("W_O")({"min_cosine": runs}) == 0.9
    losses = {"L3_seed0/W_O": 1.0, "L3_seed0/V0": 9.0, "L12_seed0/W_O": 5.0, "L12_seed0/V0": 4.5,
              "L12_seed0/none": 6.0, "L12_seed1/W_O": 5.2, "L12_seed1/W3": 5.0}  # fmt: skip
    # margins per deepest run: 5.0 - 4.5 (none excluded), 5.2 - 5.0; the smaller one
    assert output_removal_margin({"causal_loss": losses}) == pytest.approx(0.2)


def ablation_rows(model: str, steps: list[int], level: float) -> list[dict]:
    return [
        dict(model=model, seed=seed, step=s, kind="aggregate", context=c, original=level + s / 100,
             intervention=level + 1 + s / 100 + c, control=level + s / 100 + 0.1 * seed, n_heads=1 + seed + s // 100,
             n_control_heads=1)
        for s in steps for seed in (0, 1) for c in range(2)
    ]  # fmt: skip


def test_ablation_metrics_read_each_models_own_last_checkpoint():
    df = pd.DataFrame(ablation_rows("transformer4", [100, 300, 200], 2.0) + ablation_rows("mamba4", [100, 250], 4.0))
    got = ablation_metrics(df)
    assert set(got) == {"transformer4_aggregate", "mamba4_aggregate"}
    t, m = got["transformer4_aggregate"], got["mamba4_aggregate"]
    # transformer4 at step 300: original 2 + 3, intervention 2 + 1 + 3 + mean(c) = 6.5, control 5 + 0.05,
    # heads (1 + 3, 2 + 3) -> 4.5
    assert (t["original"], t["intervention"], t["control"], t["heads (mean)"]) == pytest.approx((5.0, 6.5, 5.05, 4.5))
    # mamba4 at 250, not 300 (transformer4's last): original 4 + 2.5
    assert m["original"] == pytest.approx(6.5) and m["heads (mean)"] == pytest.approx(3.5)


def test_grounding_metrics_quote_each_models_last_checkpoint():
    curve = pd.DataFrame(
        {
            "model": ["transformer4"] * 3 + ["lstm4"] * 2,
            "step": [50, 200, 100, 200, 80],
            "G": [0.1, 0.3, 0.2, 0.01, 0.05],
            "p_value": [0.2, 0.001, 0.01, 0.4, 0.3],
            "s_matched": [5.0, 4.0, 4.5, 6.0, 6.1],
            "s_mismatched": [5.1, 4.3, 4.7, 6.01, 6.15],
        }
    )
    got = grounding_metrics(curve)
    assert got["transformer4"] == {"step": 200, "G": 0.3, "p_value": 0.001, "s_matched": 4.0, "s_mismatched": 4.3}
    assert got["lstm4"]["step"] == 200 and got["lstm4"]["G"] == 0.01


def test_index_counts_only_each_studys_own_claims():
    # Binding metrics that pass both its readable claims, associations absent: the binding row
    # counts 2 passes; the associations row counts its own claims as not measured.
    binding = {"accuracy": {"mean": 1.0}, "phases": {"0": {"traversal": {"reached": True}}}}
    studies = [Study("binding", "Variable binding", "b", "binding.html", binding),
               Study("associations", "Associations", "a", None, None)]  # fmt: skip
    html = index_page(studies, CLAIMS, FIGURES, {"binding": "b.json", "associations": "a.json"}, "", _record())
    summary = html.split('id="variable-binding"')[0]
    n_assoc = sum(c.study == "associations" for c in CLAIMS)
    n_binding = sum(c.study == "binding" for c in CLAIMS)
    cells = re.findall(r'<span class="(ok|bad|note)">(\d+)</span>', summary)
    assert cells == [("ok", "2"), ("bad", "0"), ("note", str(n_binding - 2)),
                     ("ok", "0"), ("bad", "0"), ("note", str(n_assoc))]  # fmt: skip
    assert verdict(next(c for c in CLAIMS if c.text.startswith("Held-out")), binding) == (PASS, 1.0)
    assert verdict(next(c for c in CLAIMS if c.text.startswith("Held-out")), {"accuracy": {"mean": 0.5}}).status == FAIL


def _record() -> dict:
    return {"git_revision": "abc", "params_file": "params.yaml", "params_hash": "0" * 64, "seeds": [0],
            "data_hashes": {}, "machine": "m", "records": [], "stage_times": stage_times([], [])}  # fmt: skip


def test_nan_free_rounding_of_metrics():
    # a model without heads at its last checkpoint gives None, not a number from an earlier step
    df = pd.DataFrame(ablation_rows("t", [100, 200], 1.0))
    df.loc[df["step"] == 200, ["intervention", "control"]] = np.nan
    got = ablation_metrics(df)["t_aggregate"]
    assert got["intervention"] is None and got["p (intervention > control)"] is None


def test_the_llc_row_puts_its_largest_rise_beside_the_phase_starts():
    from emergence.claims import llc_beside_phases

    (f,) = [f for f in FIGURES if f.read is llc_beside_phases]
    seed = {"llc_rise_from": 4000, "llc_rise_to": 5000, "heuristic_from": 134, "traversal_from": 5000}
    metrics = {"llc": {"seed1": {**seed, "traversal_from": -1, "llc_rise_from": 12000, "llc_rise_to": 13000},
                       "seed0": seed}}  # fmt: skip
    assert f.ours(metrics) == (
        "seed0: LLC rises most 4,000->5,000; phases from 134, 5,000; "
        "seed1: LLC rises most 12,000->13,000; phases from 134, never"
    )
    assert f.ours({"llc": {"seed0": {**seed, "llc_rise_to": None}}}) == f.ours({}) == f.ours(None)
    assert f.ours({"llc": [seed]}) == f.ours(None) == "not measured"  # not a mapping
    assert f.ours({"llc": {}}) == "not run (opt-in: make repro PROFILE=full)"  # binding_llc.seeds names none
    # a phase from step 0 starts there; only a negative start means never
    assert f.ours({"llc": {"seed2": {**seed, "heuristic_from": 0}}}) == (
        "seed2: LLC rises most 4,000->5,000; phases from 0, 5,000"
    )
    assert f.section == "Local learning coefficient"
