"""What each report stage feeds its page, metrics and plots: the per-run tables of the runs params name
(not a decoy run's file beside them), the leading basis, the section params (thresholds, features,
model sizes), the provenance inputs and seeds, and where each output is written.

The page, metric and section builders are spies answering with a tag of their own, so a test follows
each table and value from the file it was read from to the argument it reaches and the file it ends in;
the tables' values differ per run."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from feeds import ROOT, one_error, ran, spy, tiny_params, workspace
from refusals import assert_names, refuses

from emergence.claims import ASSOC, BINDING, CLAIMS, FIGURES, GROUNDING, VISUAL
from emergence.core.io import file_sha256, write_parquet
from emergence.core.pipeline import read_declaration
from emergence.core.report import html as H
from emergence.studies.grounding import report_mech
from stages import index_report
from stages.assoc import report as assoc_report
from stages.binding import report as binding_report
from stages.grounding import report as grounding_report
from stages.grounding import visual_report

pytestmark = pytest.mark.usefixtures("one_thread")


def tagged(monkeypatch, module, *names: str) -> dict:
    """Spies for `names` in `module`, each answering `name#k` at its k-th call."""
    spies = {}
    for name in names:
        spies[name] = spy(monkeypatch, module, name, lambda *a, _n=name, **k: f"{_n}#{len(spies[_n].calls)}")
    return spies


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def same(got: pd.DataFrame, files: list[str]) -> None:
    """`got` is the files' rows, in that order."""
    want = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)


# --- binding: which files the report reads, and the aid variants beside the default ---

PER_SEED_KEYS = ["trajectory", "phases", "predictions", "patching", "ablation", "stress"]


def test_binding_per_seed_files_are_each_analysis_of_the_given_seeds_and_the_llc_of_binding_llcs():
    params = tiny_params({"binding_llc": {"seeds": [1]}})  # base.seeds: [0, 1]; the report is handed [3, 0]
    files = binding_report.per_seed_files(params, [3, 0])
    assert list(files) == [f"binding_{k}" for k in PER_SEED_KEYS] + ["binding_llc"]  # provenance lists them so
    for key in PER_SEED_KEYS:
        assert files[f"binding_{key}"] == [
            Path(f"data/binding/{key}/seed3.parquet"),
            Path(f"data/binding/{key}/seed0.parquet"),
        ]
    assert files["binding_llc"] == [Path("data/binding/llc/seed1.parquet")]


def test_binding_per_seed_files_follow_the_paths_section_and_read_no_llc_by_default():
    params = tiny_params(
        {"binding_llc": {"seeds": []}, "paths": {"binding_phases": "elsewhere/ph", "binding_llc": "l"}}
    )
    files = binding_report.per_seed_files(params, [2])
    assert files["binding_phases"] == [Path("elsewhere/ph/seed2.parquet")]
    assert files["binding_trajectory"] == [Path("data/binding/trajectory/seed2.parquet")]
    assert files["binding_llc"] == []


def test_binding_aid_files_are_each_variant_at_each_of_its_seeds_variant_first():
    params = tiny_params({"binding_aids": {"aids": ["plain", "no_conv"], "seeds": [3, 1]}})
    assert binding_report.aid_files(params) == [
        Path("data/binding/aids/plain-seed3.parquet"),
        Path("data/binding/aids/plain-seed1.parquet"),
        Path("data/binding/aids/no_conv-seed3.parquet"),
        Path("data/binding/aids/no_conv-seed1.parquet"),
    ]
    params["paths"]["binding_aids"] = "a"
    params["binding_aids"] = {"aids": [], "seeds": [0]}  # the default: no variant, no file
    assert binding_report.aid_files(params) == []


def test_binding_report_refuses_a_bad_aids_or_llc_section_naming_the_key():
    aids = tiny_params({"binding_aids": {"aids": ["plain"], "seeds": "three"}})
    with refuses("binding_aids.seeds", "list"):
        binding_report.aid_files(aids)
    with refuses("binding_aids.seeds", "list"):
        binding_report.side_by_side(aids, seed_tables(), [])
    llc = tiny_params({"binding_llc": {"seeds": [1]}})
    llc["binding_llc"]["sedes"] = [2]  # a misspelt key
    with refuses("binding_llc.sedes"):
        binding_report.per_seed_files(llc, [0])


def by_seed_table(key: str, seeds=(1, 0, 3, 7, 3, 1, 0, 7)) -> pd.DataFrame:
    """Rows of several seeds, interleaved; each row names its table, seed and rank within the seed."""
    return frame([{"seed": s, "row": f"{key}/{s}/{seeds[:k].count(s)}"} for k, s in enumerate(seeds)])


def seed_tables(drop: tuple[str, int] | None = None) -> dict[str, pd.DataFrame]:
    tables = {f"binding_{k}": by_seed_table(f"binding_{k}") for k in PER_SEED_KEYS}
    if drop:
        tables[drop[0]] = tables[drop[0]][tables[drop[0]]["seed"] != drop[1]]
    return tables


def aid_frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["aid", "seed", "measure", "step", "depth", "position", "value"])


AID_EDITS = {"binding_aids": {"aids": ["plain", "no_conv"], "seeds": [3, 7]}}


def test_binding_side_by_side_is_the_defaults_rows_of_the_variants_seeds_then_the_variants_files(tmp_path, monkeypatch):
    rows = spy(
        monkeypatch,
        binding_report,
        "aid_rows",
        lambda aid, seed, *tables: aid_frame([(aid, seed, "accuracy", 9, -1, "", seed / 10)]),
    )
    files = [tmp_path / "plain-seed3.parquet", tmp_path / "no_conv-seed7.parquet"]  # as handed, not sorted
    write_parquet(
        aid_frame([("no_conv", 7, "accuracy", 9, -1, "", 0.25), ("no_conv", 7, "patch", -1, 1, "rhs", 0.5)]), files[1]
    )
    write_parquet(aid_frame([("plain", 3, "phase_start", -1, 2, "", 4.0)]), files[0])
    got = binding_report.side_by_side(tiny_params(AID_EDITS), seed_tables(), files)
    assert [call[0][:2] for call in rows.calls] == [("default", 3), ("default", 7)]  # binding_aids.seeds, in order
    for (_, seed, trajectory, phases, patching), _ in rows.calls:
        for key, table in (("trajectory", trajectory), ("phases", phases), ("patching", patching)):
            assert list(table["row"]) == [f"binding_{key}/{seed}/0", f"binding_{key}/{seed}/1"]
    want = aid_frame(
        [
            ("default", 3, "accuracy", 9, -1, "", 0.3),
            ("default", 7, "accuracy", 9, -1, "", 0.7),
            ("plain", 3, "phase_start", -1, 2, "", 4.0),
            ("no_conv", 7, "accuracy", 9, -1, "", 0.25),
            ("no_conv", 7, "patch", -1, 1, "rhs", 0.5),
        ]
    )
    pd.testing.assert_frame_equal(got, want)  # index 0..4: one table


def test_binding_side_by_side_without_a_variant_is_an_empty_table_of_the_aid_columns(monkeypatch):
    rows = spy(monkeypatch, binding_report, "aid_rows", lambda *a: aid_frame([]))
    got = binding_report.side_by_side(tiny_params({"binding_aids": {"aids": []}}), {}, [Path("absent.parquet")])
    assert got.empty and list(got.columns) == ["aid", "seed", "measure", "step", "depth", "position", "value"]
    assert not rows.calls


def test_binding_report_provenance_hashes_the_programs_every_per_seed_file_and_every_aid_file(
    tmp_path, monkeypatch, capsys
):
    aids = {"binding_aids": {"aids": ["plain", "no_conv"], "seeds": [1, 0]}, "binding_llc": {"seeds": [1]}}
    params = workspace(tmp_path, monkeypatch, aids)
    for name in ("load_programs", "subset", "heuristic_table", "rank_routing_heads", "side_by_side"):
        spy(monkeypatch, binding_report, name, lambda *a, **k: frame([]))
    spy(monkeypatch, binding_report, "read_parquets", lambda paths, required: frame([]))
    for name in ("binding_metrics", "mechanism_metrics", "aids_metrics", "llc_metrics"):
        spy(monkeypatch, binding_report, name, lambda *a, **k: {})
    spy(monkeypatch, binding_report, "binding_plot_table", lambda *a: frame([{"step": 1}]))
    spy(monkeypatch, binding_report, "binding_page", lambda *a, **k: "<html>binding</html>")
    record = tagged(monkeypatch, binding_report, "provenance", "bundle_src")["provenance"]
    ran(binding_report.main, [], capsys)
    (_, seeds, inputs, _), _ = record.one
    assert seeds == params["base"]["seeds"]
    d = "data/binding"
    want = [Path(f"{d}/programs.parquet")]
    want += [Path(f"{d}/{k}/seed{s}.parquet") for k in PER_SEED_KEYS for s in params["base"]["seeds"]]
    want += [Path(f"{d}/llc/seed1.parquet")]
    want += [Path(f"{d}/aids/{aid}-seed{s}.parquet") for aid in ("plain", "no_conv") for s in (1, 0)]
    assert sorted(map(Path, inputs)) == sorted(want)


@pytest.mark.parametrize("table", ["binding_trajectory", "binding_phases", "binding_patching"])
def test_binding_side_by_side_refuses_a_variant_seed_without_a_default_run(table, monkeypatch):
    rows = spy(monkeypatch, binding_report, "aid_rows", lambda *a: aid_frame([]))
    with refuses("binding_aids.seeds", 7):
        binding_report.side_by_side(tiny_params(AID_EDITS), seed_tables(drop=(table, 7)), [])
    assert not rows.calls


def test_binding_side_by_side_needs_no_default_run_beyond_the_three_tables(monkeypatch):
    spy(monkeypatch, binding_report, "aid_rows", lambda aid, seed, *t: aid_frame([(aid, seed, "m", 0, 0, "", 1.0)]))
    for key in ("binding_predictions", "binding_ablation", "binding_stress"):
        got = binding_report.side_by_side(tiny_params(AID_EDITS), seed_tables(drop=(key, 7)), [])
        assert list(got["seed"]) == [3, 7]


def test_binding_side_by_side_refuses_a_variant_file_whose_seeds_are_no_integers(tmp_path, monkeypatch):
    spy(monkeypatch, binding_report, "aid_rows", lambda aid, seed, *t: aid_frame([(aid, seed, "m", 0, 0, "", 1.0)]))
    bad = tmp_path / "plain-seed3.parquet"
    write_parquet(aid_frame([("plain", "3", "accuracy", 9, -1, "", 0.5)]), bad)
    with refuses(bad, "seed"):
        binding_report.side_by_side(tiny_params(AID_EDITS), seed_tables(), [bad])


# --- associations ---

ASSOC_EDITS = {"assoc_runs": {"layers": [2, 1], "seeds": [0, 3]}, "assoc_compare": {"basis": "first_batch"}}
ASSOC_RUNS = ["L2_seed0", "L2_seed3", "L1_seed0", "L1_seed3"]  # layers, then seeds, as params list them


@pytest.fixture
def assoc_project(tmp_path, monkeypatch):
    params = workspace(tmp_path, monkeypatch, ASSOC_EDITS)
    for k, run in enumerate([*ASSOC_RUNS, "L3_seed0"]):  # L3_seed0: no run of assoc_runs
        layers, seed = int(run[1]), int(run.split("seed")[1])
        cos = [
            {"n_layers": layers, "seed": seed, "step": s, "weight": "V", "cosine": k + s / 10, "basis": b}
            for s in (1, 4)
            for b in ("corpus", "first_batch")
        ]
        write_parquet(frame(cos), f"data/assoc/cosines/{run}.parquet")
        causal = [{"n_layers": layers, "seed": seed, "weight": "none", "loss": 1.0 + k}]
        write_parquet(frame(causal), f"data/assoc/causal/{run}.parquet")
    write_parquet(frame([{"eta": 0.1, "step": 2, "rel_error": 0.3}]), "data/assoc/order.parquet")
    write_parquet(frame([{"probe": "dog", "matrix": "B", "token": "cat", "rank": 1}]), "data/assoc/words.parquet")
    Path("reports/metrics").mkdir(parents=True)
    Path("reports/metrics/assoc_corpus.json").write_text(json.dumps({"vocab_size": 11}))
    return params


def test_assoc_report_leads_with_the_params_basis_of_every_run(assoc_project, monkeypatch, capsys):
    page = spy(monkeypatch, assoc_report, "associations_page", lambda *a, **k: "<html>associations</html>")
    metrics = spy(monkeypatch, assoc_report, "assoc_metrics", lambda *a: {"table1": 0.5})
    plots = spy(monkeypatch, assoc_report, "plot_table", lambda c: frame([{"step": 1, "worst": 0.25}]))
    env = tagged(monkeypatch, assoc_report, "provenance", "bundle_src")
    ran(assoc_report.main, [], capsys)
    (summary, cosines, order, causal, words, record), kw = page.one
    assert summary == {"vocab_size": 11} and record == "provenance#1" and kw["plotly_src"] == "bundle_src#1"
    lead = [f"data/assoc/cosines/{r}.parquet" for r in ASSOC_RUNS]
    want = pd.concat([pd.read_parquet(f) for f in lead], ignore_index=True)
    pd.testing.assert_frame_equal(
        cosines.reset_index(drop=True), want[want["basis"] == "first_batch"].reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(
        kw["other"].reset_index(drop=True), want[want["basis"] == "corpus"].reset_index(drop=True)
    )
    same(causal, [f"data/assoc/causal/{r}.parquet" for r in ASSOC_RUNS])
    same(order, ["data/assoc/order.parquet"])
    same(words, ["data/assoc/words.parquet"])
    (params, seeds, inputs, prefixes), _ = env["provenance"].one
    assert seeds == [0, 3] and prefixes == ("assoc",)
    assert [str(p) for p in inputs] == [
        "reports/metrics/assoc_corpus.json",
        "data/assoc/order.parquet",
        "data/assoc/words.parquet",
        *lead,
        *[f"data/assoc/causal/{r}.parquet" for r in ASSOC_RUNS],
    ]
    assert [str(p) for p in env["bundle_src"].one[0]] == ["reports/associations.html", "reports/plotly.min.js"]
    assert plots.one[0][0] is cosines and metrics.one[0] == (cosines, order, causal)
    assert Path("reports/associations.html").read_text() == "<html>associations</html>"
    assert json.loads(Path("reports/metrics/associations.json").read_text()) == {"table1": 0.5, "basis": "first_batch"}
    assert Path("reports/plots/assoc_cosines.csv").read_text() == "step,worst\n1,0.25\n"


@pytest.mark.parametrize("text", [None, "{not json"])
def test_assoc_report_refuses_a_missing_or_broken_corpus_summary(text, assoc_project, monkeypatch, capsys):
    summary = Path("reports/metrics/assoc_corpus.json")
    summary.unlink() if text is None else summary.write_text(text)
    page = spy(monkeypatch, assoc_report, "associations_page", lambda *a, **k: "<html></html>")
    assert assoc_report.main([]) == 1
    assert_names(one_error(capsys), summary)
    assert not page.calls and not Path("reports/associations.html").exists()


# --- grounding (child-directed speech) ---

G_EDITS = {
    "grounding_runs": {"models": ["transformer4", "lstm4"], "seeds": [0, 2]},
    "grounding_saliency": {"models": ["transformer4"]},
    "grounding_llc": {"models": ["lstm4"], "seeds": [2]},
    "grounding_heads": {"threshold": 0.41},
    "grounding_cooc": {"features": ["pmi", "log_env"]},
    "grounding_models": {"transformer4": {"n_layers": 3}},
}
G_RUNS = ["transformer4_seed0", "transformer4_seed2", "lstm4_seed0", "lstm4_seed2"]
G_ATTENTION = ["transformer4_seed0", "transformer4_seed2"]
MECH = ["cooc_section", "lens_section", "saliency_section", "heads_section", "ablation_section", "table2_section"]
MECH += ["llc_section", "ablation_metrics", "table2_metrics", "llc_metrics"]


def keyed(run: str, rows: list[dict], setting: str | None = None) -> pd.DataFrame:
    model, seed = run.removeprefix(f"{setting}_").rsplit("_seed", 1)
    return frame([{**({"setting": setting} if setting else {}), "model": model, "seed": int(seed), **r} for r in rows])


def write_runs(folder: str, runs: list[str], rows, setting: str | None = None) -> None:
    for k, run in enumerate(runs):
        write_parquet(keyed(run, rows(k), setting), f"{folder}/{run}.parquet")


@pytest.fixture
def grounding_project(tmp_path, monkeypatch):
    params = workspace(tmp_path, monkeypatch, G_EDITS)
    g = "data/grounding"
    every = [*G_RUNS, "mamba4_seed0", "transformer4_seed1"]  # the last two: no runs of grounding_runs
    scored = {"word": "ball", "s_matched": 2.0, "s_mismatched": 2.5}
    write_runs(f"{g}/gain", every, lambda k: [{"step": 5, **scored, "gain": 0.1 * k}])
    write_runs(f"{g}/template_gain", every, lambda k: [{"step": 5, **scored, "gain": 0.2 * k}])
    write_runs(f"{g}/lens", every, lambda k: [{"step": 5, "lens": "tuned", "layer": k, "gain": 0.1}])
    write_runs(f"{g}/saliency", every, lambda k: [{"step": 5, "layer": k, "head": 0, "metric": "m", "value": 0.5}])
    write_runs(f"{g}/heads", every, lambda k: [{"step": 5, "layer": k, "head": 1, "kind": "aggregate"}])
    abl = lambda k: [{"step": 5, "kind": "aggregate", "original": 1.0, "intervention": 0.5, "control": k / 10}]  # noqa: E731
    write_runs(f"{g}/ablation", every, abl)
    write_runs(f"{g}/llc", every, lambda k: [{"step": 5, "chain": k, "llc": 2.0}])
    write_parquet(frame([{"model": "lstm4", "seed": 2, "step": 5, "r2": 0.7}]), f"{g}/cooc.parquet")
    write_parquet(frame([{"word": "ball", "pmi": 1.5}]), f"{g}/cooc_words.parquet")
    write_parquet(frame([{"word": "ball", "chosen": True}]), f"{g}/targets.parquet")
    eval_rows = [{"turn": 3, "word": "ball", "context": ["a"], "others": ["cup"]}]
    write_parquet(frame(eval_rows), f"{g}/eval.parquet")
    tpl = [{"template": "t01", "word": "ball", "context": ["<CHI>"], "n_unk": 0, "source": "s"}]
    write_parquet(frame(tpl), f"{g}/templates.parquet")
    rule = [{"measure": "held_out", "word": "ball", "gain": 0.3, "model": "lstm4", "seed": 2, "step": 9}] * 2
    write_parquet(frame(rule), f"{g}/marking/gain.parquet")
    Path(f"{g}/vocab.json").write_text(json.dumps({"targets": ["ball"], "vocab": ["ball"], "env_marking": "all"}))
    Path("reports/metrics").mkdir(parents=True)
    Path("reports/metrics/childes_counts.json").write_text(json.dumps({"utterances": 17}))
    return params


def test_grounding_report_feeds_every_section_the_runs_params_name(grounding_project, monkeypatch, capsys):
    g = "data/grounding"
    page = spy(monkeypatch, grounding_report, "grounding_page", lambda *a, **k: "<html>grounding</html>")
    env = tagged(monkeypatch, grounding_report, "provenance", "bundle_src", "grounding_metrics", "seed_table")
    curves = tagged(monkeypatch, grounding_report, "gain_by_checkpoint", "default_word_gains")
    plots = spy(monkeypatch, grounding_report, "plot_table", lambda c: frame([{"step": 5, "G": 0.5}]))
    rules_table = frame([{"measure": "held_out", "rule": "all words", "G": 0.123456789}])
    rules = spy(monkeypatch, grounding_report, "rule_table", lambda *a: rules_table)
    mech = tagged(monkeypatch, report_mech, *MECH)
    ran(grounding_report.main, [], capsys)
    (gain,), (template_gain,) = (args for args, _ in curves["gain_by_checkpoint"].calls)
    same(gain, [f"{g}/gain/{r}.parquet" for r in G_RUNS])
    same(template_gain, [f"{g}/template_gain/{r}.parquet" for r in G_RUNS])
    (cooc, cooc_words, features), _ = mech["cooc_section"].one
    same(cooc, [f"{g}/cooc.parquet"])
    same(cooc_words, [f"{g}/cooc_words.parquet"])
    assert features == ["pmi", "log_env"]
    (lens,), _ = mech["lens_section"].one
    same(lens, [f"{g}/lens/{r}.parquet" for r in G_RUNS])
    (saliency,), _ = mech["saliency_section"].one
    same(saliency, [f"{g}/saliency/{r}.parquet" for r in G_ATTENTION])
    heads, sal2, threshold = mech["heads_section"].one[0]
    same(heads, [f"{g}/heads/{r}.parquet" for r in G_ATTENTION])
    assert sal2 is saliency and threshold == 0.41
    (ablation,), _ = mech["ablation_section"].one
    same(ablation, [f"{g}/ablation/{r}.parquet" for r in G_ATTENTION])
    assert mech["table2_section"].one[0][:3] == (heads, saliency, ablation)
    assert mech["table2_section"].one[0][3] == {"transformer4": 3}
    (llc,), _ = mech["llc_section"].one
    same(llc, [f"{g}/llc/lstm4_seed2.parquet"])
    rule_ablation = pd.read_parquet(f"{g}/marking/gain.parquet")
    assert curves["default_word_gains"].one[0] == (gain, template_gain, "lstm4", 2)
    (word_gains, got_rules), _ = rules.one
    assert word_gains == "default_word_gains#1"
    pd.testing.assert_frame_equal(got_rules, rule_ablation, check_dtype=False)
    assert env["seed_table"].one[0] == (gain, template_gain)
    args, kw = page.one
    counts, targets, eval_set, curve, sections, record, marking, templates, template_curve, seeds, rule = args
    assert (
        counts == {"utterances": 17}
        and marking == "all"
        and (curve, template_curve) == ("gain_by_checkpoint#1", "gain_by_checkpoint#2")
    )
    same(targets, [f"{g}/targets.parquet"])
    same(templates, [f"{g}/templates.parquet"])
    assert eval_set["turn"].tolist() == [3]
    assert [s for _, s in sections] == [f"{n}#1" for n in MECH[:7]]
    assert (record, seeds, rule) == ("provenance#1", "seed_table#1", (rules_table, "lstm4 seed 2"))
    assert kw == {"plotly_src": "bundle_src#1"}
    (_, seeds, used, prefixes), _ = env["provenance"].one
    assert seeds == [0, 2] and prefixes == ("childes", "grounding")
    fixed = [
        "marking/gain.parquet",
        "vocab.json",
        "targets.parquet",
        "eval.parquet",
        "cooc.parquet",
        "cooc_words.parquet",
        "templates.parquet",
    ]
    per_run = [f"{w}/{r}.parquet" for w in ("gain", "template_gain", "lens") for r in G_RUNS]
    per_run += [f"{w}/{r}.parquet" for w in ("saliency", "heads", "ablation") for r in G_ATTENTION]
    assert [str(p) for p in used] == [
        f"{g}/{fixed[0]}",
        "reports/metrics/childes_counts.json",
        *[f"{g}/{f}" for f in fixed[1:]],
        *[f"{g}/{f}" for f in per_run],
        f"{g}/llc/lstm4_seed2.parquet",
    ]
    assert [str(p) for p in env["bundle_src"].one[0]] == ["reports/grounding.html", "reports/plotly.min.js"]
    assert plots.one[0] == ("gain_by_checkpoint#1",)
    assert [a for a, _ in env["grounding_metrics"].calls] == [("gain_by_checkpoint#1",), ("gain_by_checkpoint#2",)]
    assert mech["ablation_metrics"].one[0] == (ablation,) and mech["table2_metrics"].one[0] == (
        heads,
        saliency,
        ablation,
    )
    assert mech["llc_metrics"].one[0] == (llc,)
    assert json.loads(Path("reports/metrics/grounding.json").read_text()) == {
        "gain": "grounding_metrics#1",
        "template_gain": "grounding_metrics#2",
        "ablation": "ablation_metrics#1",
        "table2": "table2_metrics#1",
        "word_rule": {"held_out/all": 0.12346},
        "llc": "llc_metrics#1",
    }
    assert Path("reports/grounding.html").read_text() == "<html>grounding</html>"
    assert Path("reports/plots/grounding_gain.csv").read_text() == "step,G\n5,0.5\n"


def test_grounding_report_refuses_unreadable_transcript_counts(grounding_project, monkeypatch, capsys):
    Path("reports/metrics/childes_counts.json").write_text("{")
    page = spy(monkeypatch, grounding_report, "grounding_page", lambda *a, **k: "<html></html>")
    assert grounding_report.main([]) == 1
    assert_names(one_error(capsys), "reports/metrics/childes_counts.json", "JSONDecodeError")
    assert not page.calls and not Path("reports/metrics/grounding.json").exists()


@pytest.mark.parametrize("table", ["marking/gain.parquet", "gain/lstm4_seed2.parquet"])
def test_grounding_report_refuses_an_empty_rule_ablation_or_a_gain_table_without_its_scores(
    table, grounding_project, monkeypatch, capsys
):
    path = f"data/grounding/{table}"
    if table.startswith("marking"):
        write_parquet(pd.read_parquet(path).iloc[:0], path)
    else:
        write_parquet(pd.read_parquet(path).drop(columns="s_mismatched"), path)
    tagged(monkeypatch, report_mech, *MECH)
    page = spy(monkeypatch, grounding_report, "grounding_page", lambda *a, **k: "<html></html>")
    assert grounding_report.main([]) == 1
    assert_names(one_error(capsys), path, *([] if table.startswith("marking") else ["s_mismatched"]))
    assert not page.calls and not Path("reports/metrics/grounding.json").exists()


# --- grounding (visual dialogue) ---

V_EDITS = {
    "visual_runs": {"settings": ["image", "caption"], "models": ["transformer4", "lstm4"], "seeds": [0, 2]},
    "visual_saliency": {"models": ["transformer4"]},
    "visual_heads": {"threshold": 0.45, "image_baseline": "none"},
}
V_RUNS = [f"{s}_{m}_seed{k}" for s in ("image", "caption") for m in ("transformer4", "lstm4") for k in (0, 2)]
V_ATTENTION = [r for r in V_RUNS if "transformer4" in r]


@pytest.fixture
def visual_project(tmp_path, monkeypatch):
    params = workspace(tmp_path, monkeypatch, V_EDITS)
    v = "data/visual"
    every = [*V_RUNS, "image_transformer4_seed1", "caption_mamba4_seed0"]  # the last two: no runs of visual_runs
    for k, run in enumerate(every):
        rows = {
            "gain": {"step": 5, "word": "ball", "gain": 0.1 * k},
            "saliency": {"step": 5, "layer": k, "head": 0, "metric": "m", "value": 0.5},
            "heads": {"step": 5, "layer": k, "head": 1, "kind": "aggregate"},
            "ablation": {"step": 5, "kind": "aggregate", "original": 1.0, "intervention": 0.5, "control": k / 10}
            | {"n_heads": 1, "n_control_heads": 1},
        }
        for what, row in rows.items():
            write_parquet(keyed(run, [row], run.split("_")[0]), f"{v}/{what}/{run}.parquet")
    write_parquet(frame([{"word": "ball", "chosen": True}]), f"{v}/targets.parquet")
    ev = {"turn": 3, "word": "ball", "context": ["a"], "others": ["cup"], "image_id": 7}
    write_parquet(frame([{**ev, "image_context": ["a"], "other_images": [8]}]), f"{v}/eval.parquet")
    Path(f"{v}/features").mkdir(parents=True)
    Path(f"{v}/features/encoder.json").write_text(json.dumps({"encoder_id": "dino", "pretrained": True}))
    Path("reports/metrics").mkdir(parents=True)
    Path("reports/metrics/visdial_counts.json").write_text(json.dumps({"dialogs": 21}))
    return params


def test_visual_report_feeds_the_runs_of_every_setting_and_the_head_params(visual_project, monkeypatch, capsys):
    v = "data/visual"
    page = spy(monkeypatch, visual_report, "visual_page", lambda *a: "<html>visual</html>")
    env = tagged(monkeypatch, visual_report, "provenance", "bundle_src", "visual_curve", "mechanism_sections")
    metrics = spy(monkeypatch, visual_report, "visual_metrics", lambda curve, ablation: {"G": 0.5})
    ran(visual_report.main, [], capsys)
    (gain,), _ = env["visual_curve"].one
    same(gain, [f"{v}/gain/{r}.parquet" for r in V_RUNS])
    saliency, heads, ablation, threshold, baseline = env["mechanism_sections"].one[0]
    same(saliency, [f"{v}/saliency/{r}.parquet" for r in V_ATTENTION])
    same(heads, [f"{v}/heads/{r}.parquet" for r in V_ATTENTION])
    same(ablation, [f"{v}/ablation/{r}.parquet" for r in V_ATTENTION])
    assert (threshold, baseline) == (0.45, "none")
    assert metrics.one[0] == ("visual_curve#1", ablation)
    counts, targets, eval_set, encoder, curve, sections, record, src = page.one[0]
    assert counts == {"dialogs": 21} and encoder == {"encoder_id": "dino", "pretrained": True}
    same(targets, [f"{v}/targets.parquet"])
    assert eval_set["image_id"].tolist() == [7]
    assert (curve, sections, record, src) == ("visual_curve#1", "mechanism_sections#1", "provenance#1", "bundle_src#1")
    (_, seeds, used, prefixes), _ = env["provenance"].one
    assert seeds == [0, 2] and prefixes == ("visual", "visdial", "dino", "grounding_models")
    assert [str(p) for p in used] == [
        "reports/metrics/visdial_counts.json",
        f"{v}/features/encoder.json",
        f"{v}/targets.parquet",
        f"{v}/eval.parquet",
        *[f"{v}/gain/{r}.parquet" for r in V_RUNS],
        *[f"{v}/{w}/{r}.parquet" for w in ("saliency", "heads", "ablation") for r in V_ATTENTION],
    ]
    assert [str(p) for p in env["bundle_src"].one[0]] == ["reports/grounding_visual.html", "reports/plotly.min.js"]
    assert json.loads(Path("reports/metrics/grounding_visual.json").read_text()) == {
        "encoder_pretrained": True,
        "G": 0.5,
    }
    assert Path("reports/grounding_visual.html").read_text() == "<html>visual</html>"


@pytest.mark.parametrize("broken", ["reports/metrics/visdial_counts.json", "data/visual/features/encoder.json"])
def test_visual_report_refuses_an_unreadable_record(broken, visual_project, monkeypatch, capsys):
    Path(broken).write_text("[1,")
    page = spy(monkeypatch, visual_report, "visual_page", lambda *a: "<html></html>")
    assert visual_report.main([]) == 1
    assert_names(one_error(capsys), broken)
    assert not page.calls and not Path("reports/metrics/grounding_visual.json").exists()


# --- index ---

PAGES = {BINDING: "reports/b.html", ASSOC: "reports/a.html", GROUNDING: "reports/g.html", VISUAL: "reports/v.html"}
METRICS = {
    BINDING: "reports/m/b.json",
    ASSOC: "reports/m/a.json",
    GROUNDING: "reports/m/g.json",
    VISUAL: "reports/m/v.json",
}
KEYS = {BINDING: "binding", ASSOC: "assoc", GROUNDING: "grounding", VISUAL: "visual"}
INDEX_EDITS = {
    "base": {"seeds": [0, 4]},
    "paths": {
        "index_report": "reports/site/index.html",
        "bench_report": "reports/m/bench.json",
        **{f"{KEYS[k]}_report": p for k, p in PAGES.items()},
        **{f"{KEYS[k]}_metrics": p for k, p in METRICS.items()},
    },
}


def study_page(key: str, leave_out: int = 0) -> str:
    """A page with an anchor for every section a claim or figure of `key` links to (less the first
    `leave_out`)."""
    sections = sorted({c.section for c in CLAIMS if c.study == key} | {f.section for f in FIGURES if f.study == key})
    return "".join(f'<h2 id="{H.anchor(s)}">{s}</h2>' for s in sections[leave_out:])


@pytest.fixture
def index_project(tmp_path, monkeypatch):
    """Pages of binding and grounding (assoc's and visual's not built), metrics of all but visual, a bench."""
    params = workspace(tmp_path, monkeypatch, INDEX_EDITS)
    for key in (BINDING, GROUNDING):
        Path(PAGES[key]).parent.mkdir(parents=True, exist_ok=True)
        Path(PAGES[key]).write_text(study_page(key))
    Path("reports/m").mkdir(parents=True)
    for key in (BINDING, ASSOC, GROUNDING):
        Path(METRICS[key]).write_text(json.dumps({"of": key}))
    Path("reports/m/bench.json").write_text("{}")
    return params


def index_spies(monkeypatch) -> dict:
    spies = tagged(monkeypatch, index_report, "bench_section", "git_revision", "machine", "stage_times")
    spies["read_bench"] = spy(monkeypatch, index_report, "read_bench", lambda path: {"bench of": str(path)})
    spies["stage_records"] = spy(monkeypatch, index_report, "stage_records", lambda: ["record"])
    spies["index_page"] = spy(monkeypatch, index_report, "index_page", lambda *a: "<html>index</html>")
    spies["headlines"] = spy(monkeypatch, index_report, "headlines", lambda claims, m: {"headline": sorted(m)})
    return spies


def test_index_report_links_each_built_study_page_and_reads_its_metrics(index_project, monkeypatch, capsys):
    Path("p2.yaml").write_text(Path("params.yaml").read_text() + "# another file\n")
    spies = index_spies(monkeypatch)
    ran(index_report.main, ["--params", "p2.yaml"], capsys)
    studies, claims, figures, metric_paths, bench, record = spies["index_page"].one[0]
    assert (claims, figures) == (CLAIMS, FIGURES) and [s.key for s in studies] == [BINDING, ASSOC, GROUNDING, VISUAL]
    assert [s.href for s in studies] == [os.path.relpath(PAGES[BINDING], "reports/site"), None, "../g.html", None]
    assert [s.metrics for s in studies] == [{"of": BINDING}, {"of": ASSOC}, {"of": GROUNDING}, None]
    assert [s.title for s in studies] == [entry[3] for entry in index_report.STUDIES]
    assert [s.summary for s in studies] == [entry[4] for entry in index_report.STUDIES]
    assert metric_paths == METRICS
    assert spies["read_bench"].one[0] == (Path("reports/m/bench.json"),)
    assert spies["bench_section"].one[0] == ({"bench of": "reports/m/bench.json"}, "reports/m/bench.json")
    assert bench == "bench_section#1"
    assert spies["stage_times"].one[0] == (["record"], list(read_declaration(ROOT)["stages"]))
    assert record == {
        "git_revision": "git_revision#1",
        "params_file": "p2.yaml",
        "params_hash": file_sha256("p2.yaml"),
        "seeds": [0, 4],
        "data_hashes": {
            p: file_sha256(p) for p in (*(METRICS[k] for k in (BINDING, ASSOC, GROUNDING)), "reports/m/bench.json")
        },
        "machine": "machine#1",
        "records": ["record"],
        "stage_times": "stage_times#1",
    }
    assert spies["headlines"].one[0][0] == CLAIMS
    assert spies["headlines"].one[0][1] == {s.key: s.metrics for s in studies}
    assert Path("reports/site/index.html").read_text() == "<html>index</html>"
    assert json.loads(Path("reports/metrics/headlines.json").read_text()) == {"headline": sorted(PAGES)}


def test_index_report_refuses_a_study_page_without_a_claims_section(index_project, monkeypatch, capsys):
    Path(PAGES[GROUNDING]).write_text(study_page(GROUNDING, leave_out=1))
    spies = index_spies(monkeypatch)
    assert index_report.main([]) == 1
    assert_names(one_error(capsys), "src/emergence/claims.py", GROUNDING, PAGES[GROUNDING])
    assert not spies["index_page"].calls


def test_index_report_names_every_missing_section_and_the_rule_they_break(index_project, monkeypatch, capsys):
    """Binding's page without its first two sections (of five, sorted): both listed, the three it has not."""
    Path(PAGES[BINDING]).write_text(study_page(BINDING, leave_out=2))
    index_spies(monkeypatch)
    assert index_report.main([]) == 1
    line = one_error(capsys)
    assert_names(line, BINDING, PAGES[BINDING], "no section 'Generalisation', 'Headline numbers' on")
    assert not any(s in line for s in ("Local learning coefficient", "Patching", "Training trajectory"))
    assert re.search(r" \([^()]*\bheading\b[^()]*study page\)$", line), line  # the rule, in parentheses, last


def test_index_report_reads_metrics_and_pages_as_utf_8_whatever_the_locale(
    index_project, monkeypatch, capsys, ascii_locale
):
    Path(METRICS[ASSOC]).write_bytes(json.dumps({"of": "caf\u00e9"}, ensure_ascii=False).encode())
    Path(PAGES[BINDING]).write_bytes((study_page(BINDING) + "<p>\u2265 90 %</p>").encode())
    spies = index_spies(monkeypatch)
    ran(index_report.main, [], capsys)
    studies = spies["index_page"].one[0][0]
    assert studies[1].metrics == {"of": "caf\u00e9"} and studies[0].href is not None


@pytest.mark.parametrize("text, named", [("[1, 2]", ["list"]), ('"of"', ["str"]), ("{oops", [])])
def test_index_report_refuses_metrics_that_are_no_json_object(text, named, index_project, monkeypatch, capsys):
    Path(METRICS[ASSOC]).write_text(text)
    spies = index_spies(monkeypatch)
    assert index_report.main([]) == 1
    assert_names(one_error(capsys), METRICS[ASSOC], *named)  # and the kind of JSON value found instead
    assert not spies["index_page"].calls and not Path("reports/metrics/headlines.json").exists()
