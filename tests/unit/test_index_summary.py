"""The index page's summary logic on hand-made metrics: claims at their threshold edges, missing
metrics, the benchmark table's reader, the stage-record table and the run-specific block."""

from __future__ import annotations

import json
import re

import pytest
from artifacts import comparable
from refusals import refuses

from emergence.claims import CLAIMS, FIGURES, _grounds, min_cosine, output_removal_margin, weakest_patching_along_chain
from emergence.core.report import html as H
from emergence.core.report.bench import bench_section, read_bench
from emergence.core.report.claims import FAIL, NOT_MEASURED, PASS, Claim, at, headlines, verdict
from emergence.core.report.index import Study, index_page, missing_sections
from emergence.core.report.provenance import stage_records, stage_times


def claim(op: str, threshold: float) -> Claim:
    return Claim("s", "c", "x", at("x"), op, threshold, "rule", "Section")


@pytest.mark.parametrize(
    "op, threshold, value, expected",
    [
        (">", 0.999, 0.999, FAIL),  # "> 99.9 %": exactly 99.9 % is not above it
        (">", 0.999, 0.9990001, PASS),
        (">=", 0.999, 0.999, PASS),
        (">=", 0.999, 0.9989999, FAIL),
        ("<", 0.001, 0.001, FAIL),  # "p < 0.001": exactly 0.001 is not below it
        ("<", 0.001, 0.000999, PASS),
        ("<=", 0.5, 0.5, PASS),
    ],
)
def test_verdict_at_threshold_edges(op, threshold, value, expected):
    v = verdict(claim(op, threshold), {"x": value})
    assert (v.status, v.value) == (expected, value)


@pytest.mark.parametrize("metrics", [None, {}, {"x": None}, {"x": "0.5"}, {"x": True}, {"x": float("nan")}, {"y": 1}])
def test_missing_or_non_numeric_metric_is_not_measured_never_pass(metrics):
    for op in (">", ">=", "<", "<="):  # whatever the rule, even one a missing number would "meet"
        assert verdict(claim(op, 0.5), metrics) == verdict(claim(op, 0.5), None)
        assert verdict(claim(op, 0.5), metrics).status == NOT_MEASURED


def by_text(study: str, start: str) -> Claim:
    (found,) = [c for c in CLAIMS if c.study == study and c.text.startswith(start)]
    return found


def test_binding_claims_on_hand_made_metrics():
    metrics = {
        "accuracy": {"mean": 0.999},
        "phases": {"0": {"traversal": {"reached": True}}, "1": {"traversal": {"reached": False}}},
        "mechanisms": {"patching_by_depth": {"0": {"success": 1.0}, "1": {"success": 0.96}, "2": {"success": 0.85}}},
    }
    assert verdict(by_text("binding", "Held-out"), metrics) == (FAIL, 0.999)  # the paper's "> 99.9 %"
    assert verdict(by_text("binding", "Chain traversal"), metrics) == (FAIL, 0.5)  # 1 of 2 seeds
    # the smallest over depths 1 and 2; depth 0 (the constant itself) is a control
    assert verdict(by_text("binding", "Patching"), metrics) == (PASS, 0.85)
    metrics["mechanisms"]["patching_by_depth"]["2"]["success"] = 0.8
    assert verdict(by_text("binding", "Patching"), metrics) == (FAIL, 0.8)
    metrics["phases"]["1"]["traversal"]["reached"] = True
    assert verdict(by_text("binding", "Chain traversal"), metrics) == (PASS, 1.0)
    only_control = {"mechanisms": {"patching_by_depth": {"0": {"success": 1.0}}}}  # the tiny profile: no chain
    assert verdict(by_text("binding", "Patching"), only_control).status == NOT_MEASURED
    assert verdict(by_text("binding", "Chain traversal"), {"phases": {}}).status == NOT_MEASURED


def test_headlines_hold_each_claims_number_under_a_key_of_where_it_is_read():
    """reports/metrics/headlines.json, DVC's one metrics file: per study, one key per claim."""
    metrics = {
        "binding": {"accuracy": {"mean": 0.9987}, "phases": {"0": {"traversal": {"reached": True}}}},
        "associations": None,  # its page not built: every claim not measured
    }
    got = headlines(CLAIMS, metrics)
    assert set(got) == {c.study for c in CLAIMS}
    assert sum(map(len, got.values())) == len(CLAIMS)  # no two claims of a study share a key
    assert got["binding"] == {"accuracy.mean": 0.9987, "phases.traversal.reached": 1.0,
                              "mechanisms.patching_by_depth": None}  # fmt: skip
    assert set(got["associations"]) == {"min_cosine.W", "min_cosine.V", "min_cosine.W_O", "min_cosine.P",
                                        "causal_loss.W_O"}  # fmt: skip
    assert set(got["associations"].values()) == {None}
    assert "ablation.transformer4_aggregate" in got["grounding"]


@pytest.mark.parametrize(
    "where, key",
    [
        ("causal_loss.<deepest run>/W_O", "causal_loss.W_O"),  # a file-like key: "/" read as a level
        ("loss/by_depth/2", "loss.by_depth.2"),
        ("gain.<run>.<depth>/slope (fitted)", "gain.slope"),  # two placeholders, then a "/": one dot left
        ("<deepest run>.W<layer> (minimum)", "W"),  # no leading dot where the path starts with a placeholder
        ("accuracy.<run>", "accuracy"),  # nor a trailing one where it ends with one
        ("scores.X", "scores.X"),  # a capital X is part of the key
        ("Xrate.mean[0]", "Xrate.mean"),
        ("p_value (one-sided) of 3 runs", "p_value"),
    ],
)
def test_headline_key_is_the_path_the_claim_reads_without_placeholders_or_trailing_words(where, key):
    (got,) = headlines([Claim("s", "c", where, at("x"), ">", 0.5, "rule", "Section")], {"s": {"x": 1.0}})["s"]
    assert got == key


def test_headlines_round_each_number_to_six_decimals():
    claims = [Claim("s", "c", w, at(w), ">", 0.5, "rule", "Section") for w in ("a", "b", "c")]
    got = headlines(claims, {"s": {"a": 0.12345678, "b": 0.9999996, "c": 2}})
    assert got == {"s": {"a": 0.123457, "b": 1.0, "c": 2.0}}


def test_association_claims_read_the_deepest_run_and_the_right_weight():
    metrics = {
        "min_cosine": {
            "L1_seed0": {"W0": 0.2, "V0": 0.2, "W_O": 0.2, "P0": 0.2},  # shallower run: ignored
            "L3_seed0": {"W0": 0.9995, "W1": 0.99899, "V0": 0.9999, "W_O": 0.5, "P0": 0.99, "P1": 0.995},
        },
        "causal_loss": {
            "L1_seed0/W_O": 9.0,
            "L3_seed0/none": 4.69,
            "L3_seed0/W0": 4.69,
            "L3_seed0/V0": 4.70,
            "L3_seed0/P0": 4.69,
            "L3_seed0/W_O": 4.85,
        },
    }
    results = {c.text.split()[1]: verdict(c, metrics) for c in CLAIMS if c.text.startswith("Learned")}
    assert results == {
        "W": (FAIL, 0.99899),  # min of W0, W1; never W_O
        "V": (PASS, 0.9999),
        "W_O": (FAIL, 0.5),
        "P": (PASS, 0.99),  # P's bar is 0.99, met with equality
    }
    assert verdict(by_text("associations", "Removing"), metrics) == (PASS, pytest.approx(4.85 - 4.70))
    metrics["causal_loss"]["L3_seed0/V0"] = 4.85
    assert verdict(by_text("associations", "Removing"), metrics).status == FAIL  # a tie is not "most"


def test_grounding_claims_at_the_significance_level():
    metrics = {
        "template_gain": {"transformer4": {"p_value": 0.01}, "mamba4": {"p_value": 0.0099}, "lstm4": {"p_value": 0.01}},
        "ablation": {"transformer4_aggregate": {"p (intervention > control)": None}},
    }
    assert verdict(by_text("grounding", "Transformer grounds"), metrics).status == FAIL
    assert verdict(by_text("grounding", "Mamba-2 grounds"), metrics).status == PASS
    assert verdict(by_text("grounding", "LSTM does not"), metrics).status == PASS
    assert verdict(by_text("grounding", "Zeroing"), metrics).status == NOT_MEASURED  # no aggregate head
    visual = {"caption_transformer4": {"p_value": 0.0009}}
    assert verdict(by_text("grounding_visual", "Transformer, caption"), visual).status == PASS
    assert verdict(by_text("grounding_visual", "Transformer, DINOv2"), visual).status == NOT_MEASURED


def test_readers_at_their_edges():
    """Depth 1 is the first chain depth; a missing weight, a missing number or no run is None, never a crash."""

    def by_depth(**success):
        return {"mechanisms": {"patching_by_depth": {d[1:]: {"success": s} for d, s in success.items()}}}

    assert weakest_patching_along_chain(by_depth(d0=0.1, d1=0.5, d2=0.9)) == 0.5  # depth 1 counts, depth 0 not
    assert weakest_patching_along_chain(by_depth(d0=0.1, d1=0.5, d2=None)) is None
    runs = {"min_cosine": {"L2_seed0": {"V0": 0.9, "W0": 0.7, "W1": None}}}
    assert min_cosine("V")(runs) == 0.9
    assert min_cosine("W")(runs) is None  # one layer without a number: no minimum
    assert min_cosine("P")(runs) is None  # a weight the run does not have
    loss = {"L2_seed0/W_O": 5.0, "L2_seed0/none": 4.0}
    assert output_removal_margin({"causal_loss": loss}) is None  # nothing else removed to compare with
    assert output_removal_margin({"causal_loss": {"L2_seed0/V0": 4.0}}) is None  # W_O not removed
    assert output_removal_margin({"causal_loss": {**loss, "L2_seed0/V0": None}}) is None
    assert output_removal_margin({"causal_loss": {}}) is None
    g = _grounds("s", "gain.model4", "Model", "paper says", "Section")
    assert (g.study, g.text, g.where, g.op, g.threshold, g.rule, g.section) == (
        "s", "Model grounds (G > 0, one-sided p < 0.01)", "gain.model4.p_value", "<", 0.01,
        "paper says; level ours (p < 0.01, as on the study page); the paper gives none for the gain", "Section",
    )  # fmt: skip
    assert g.read({"gain": {"model4": {"p_value": 0.003}}}) == 0.003


# ---- the benchmark table ----------------------------------------------------------------------------

ROW = {
    "benchmark": "training tokens/s",
    "value": 12345.0,
    "unit": "tokens/s",
    "reference": "HF GPT2LMHeadModel",
    "reference_value": 9000.0,
    "ratio": 1.37,
    "target": ">= 1.5x",
    "met": False,
    "bound": "memory bandwidth",
}


def write_bench(tmp_path, text: str):
    path = tmp_path / "bench.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "row, key, named",
    [
        ({**ROW, "value": "fast"}, "value", ["finite number", "got 'fast'"]),
        ({**ROW, "value": True}, "value", ["finite number", "got True"]),
        ({**ROW, "ratio": "1.3"}, "ratio", ["finite number", "got '1.3'"]),
        ({**ROW, "met": "yes"}, "met", ["true or false", "got 'yes'"]),
        ({k: v for k, v in ROW.items() if k != "unit"}, "unit", ["missing"]),
        ({**ROW, "benchmark": None}, "benchmark", ["string", "got None"]),
        ({**ROW, "refrence": "x"}, "refrence", ["unknown key"]),
        ([1, 2], None, ["object"]),
    ],
)
def test_malformed_bench_row_is_one_line_naming_row_and_key(tmp_path, row, key, named):
    path = write_bench(tmp_path, json.dumps({"measured": None, "machine": None, "rows": [ROW, row]}))
    with refuses(path, f"rows[1].{key}: " if key else "rows[1]: ", *named):
        read_bench(path)


@pytest.mark.parametrize(
    "text, named",
    [
        ('{"rows": [{"value": NaN}]}', ["NaN", "finite number"]),
        ("[]", ["JSON object"]),
        ('{"machine": "x"}', ["rows: ", "list"]),
        ('{"rows": [], "machine": 3}', [".machine: ", "got 3"]),
        ("{", ["readable JSON"]),
    ],
)
def test_malformed_bench_file_is_one_line(tmp_path, text, named):
    path = write_bench(tmp_path, text)
    with refuses(path, *named):
        read_bench(path)


def test_bench_row_not_measured_shows_its_reason(tmp_path):
    """make bench writes value null for a row it could not measure; the page says why, no number."""
    row = {**ROW, "value": None, "reference_value": None, "ratio": None, "met": None, "bound": "not measured: no run"}
    table = read_bench(write_bench(tmp_path, json.dumps({"measured": None, "machine": None, "rows": [row]})))
    html = bench_section(table, "reports/bench.json")
    assert "not measured: no run" in html and "12345" not in html


def test_bench_absent_or_empty_is_not_measured_yet(tmp_path):
    assert read_bench(tmp_path / "none.json") is None
    assert "Not measured yet" in bench_section(None, "reports/bench.json")
    empty = read_bench(write_bench(tmp_path, '{"measured": null, "machine": null, "rows": []}'))
    assert "Not measured yet" in bench_section(empty, "reports/bench.json")
    table = read_bench(write_bench(tmp_path, json.dumps({"measured": "2026-11-26", "machine": "m", "rows": [ROW]})))
    html = bench_section(table, "reports/bench.json")
    assert all(
        s in html
        for s in (
            "training tokens/s",
            "<td>12345</td>",
            "<td>1.37</td>",
            "memory bandwidth",
            '<td class="text">no</td>',
        )
    )


# ---- stage records and the page --------------------------------------------------------------------


def test_stage_times_per_declared_stage(tmp_path):
    assert stage_records(tmp_path / "absent") == []
    folder = tmp_path / "stages"
    folder.mkdir()
    for name, record in {
        "a0": {"stage": "train@0", "engine": "dvc", "wall_s": 10.0, "max_rss_mb": 300.0, "exit": 0},
        "a1": {"stage": "train@1", "engine": "snakemake", "wall_s": 2.5, "max_rss_mb": 310.5, "exit": 1},
        "d": {"stage": None, "command": "python -m stages.x", "engine": "direct", "wall_s": 99.0, "exit": 0},
    }.items():
        (folder / f"{name}.json").write_text(json.dumps(record))
    (folder / "torn.json").write_text('{"stage": "tra')  # a writer killed mid-file
    records = stage_records(folder)
    assert len(records) == 4 and any("torn.json: unreadable record" in str(r["command"]) for r in records)
    train, report = stage_times(records, ["train", "report"])
    assert train == {
        "stage": "train",
        "instances recorded": 2,
        "engine": "dvc, snakemake",
        "wall s (sum)": 12.5,
        "wall s (longest)": 10.0,
        "max RSS MB": 310.5,
        "failed": 1,
    }
    assert report["instances recorded"] == report["wall s (sum)"] == report["engine"] == "not recorded"


def record(records: list[dict], machine: str = "host-a") -> dict:
    return {
        "git_revision": "abc",
        "params_file": "params.yaml",
        "params_hash": "0" * 64,
        "seeds": [0, 1],
        "data_hashes": {"reports/metrics/binding.json": "1" * 64},
        "machine": machine,
        "records": records,
        "stage_times": stage_times(records, ["binding_train"]),
    }


def page(metrics: dict | None, href: str | None = "binding.html", run: dict | None = None) -> str:
    study = Study("binding", "Variable binding", "chains", href, metrics)
    return index_page(
        [study], CLAIMS, FIGURES, {"binding": "reports/metrics/binding.json"}, "<p>bench</p>", run or record([])
    )


def test_index_page_counts_links_and_missing_metrics():
    html = page({"accuracy": {"mean": 1.0}})
    summary = html.split('id="variable-binding"')[0]
    assert re.search(r'<span class="ok">1</span>.*<span class="bad">0</span>.*<span class="note">2</span>', summary)
    assert f'href="binding.html#{H.anchor("Headline numbers")}"' in html
    assert 'href="#variable-binding"' in html
    assert "Wall time per stage: not recorded" in html and "Engine: not recorded" in html
    absent = page(None)
    assert '<span class="ok">' + "0</span>" in absent and '<span class="ok">pass</span>' not in absent
    assert "absent: nothing measured" in absent
    assert "The study page has not been built" in page(None, href=None)
    assert 'href="binding.html' not in page(None, href=None)


def test_missing_sections():
    text = H.page("t", [("Headline numbers", "x"), ("Causal check", "y")])
    assert missing_sections(text, ["Headline numbers", "Causal check"]) == []
    assert missing_sections(text, ["Headline numbers", "Patching by chain depth"]) == ["Patching by chain depth"]


def test_comparison_blanks_only_the_run_specific_block():
    """Two engines' indexes differ in machine, engine and wall times only: the comparison that ignores
    the revision must call them equal, and still tell a different number apart."""
    runs = {
        "dvc": page({"accuracy": {"mean": 1.0}}, run=record([{"stage": "binding_train@0", "engine": "dvc",
                                                               "wall_s": 1.0, "max_rss_mb": 1.0, "exit": 0}])),
        "smk": page({"accuracy": {"mean": 1.0}}, run=record([{"stage": "binding_train@0", "engine": "snakemake",
                                                               "wall_s": 2.0, "max_rss_mb": 2.0, "exit": 0}], "b")),
        "other": page({"accuracy": {"mean": 0.5}}),
    }  # fmt: skip
    seen = {name: comparable(html.encode(), ".html", ignore_revision=True) for name, html in runs.items()}
    assert runs["dvc"] != runs["smk"] and "snakemake" in runs["smk"]
    assert seen["dvc"] == seen["smk"] != seen["other"]
    assert comparable(runs["smk"].encode(), ".html", ignore_revision=False) == runs["smk"].encode()
