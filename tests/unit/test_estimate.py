"""The time a run will take, said before it starts (`emergence check`, make repro, make snakemake): its
formula by hand, and against the runs recorded in bench/estimate_runs.json (within ±50 %)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from emergence.check import main as check_main
from emergence.core.config import read_params
from emergence.core.declared import instances
from emergence.core.profile import merge_into, profile_path
from emergence.core.resources import STEP_S, Workload
from emergence.estimate import (
    CKPT_S,
    ENGINE_S,
    Rates,
    analysis,
    binding_context,
    estimate,
    jobs,
    lines,
    measure,
    study_of,
)

SHIPPED = read_params(ROOT / "params.yaml")
RATES = Rates(flops=50e9, start_s=3.0)
RUNS = json.loads((ROOT / "bench" / "estimate_runs.json").read_text())


def with_profiles(names: list[str]) -> dict:
    params = copy.deepcopy(SHIPPED)
    for name in names:
        assert (
            merge_into(params, yaml.safe_load(profile_path(str(ROOT / "profiles" / f"{name}.yaml")).read_text())) == []
        )
    return params


@pytest.mark.parametrize(
    "instance, study",
    [
        ("binding_train@0", "binding"),
        ("assoc_train@2-0", "associations"),
        ("childes_synth", "grounding"),
        ("grounding_llc@mamba4-0", "grounding"),
        ("visual_train@image-transformer4-0", "visual"),
        ("visdial_extract", "visual"),
        ("dino_features", "visual"),
        ("index_report", "pipeline"),
        ("params_check", "pipeline"),
    ],
)
def test_each_stage_counts_toward_the_study_whose_page_shows_it(instance, study):
    assert study_of(instance) == study


def test_a_binding_batch_is_as_long_as_its_programs_not_the_context():
    w = Workload(n_layers=8, d_model=64, d_mlp=256, d_attn=64, n_heads=4, context=128, batch=32, steps=10)
    params = {"binding_programs": {"n_lines": 16}}
    assert binding_context(params, ["binding_programs", "binding_train"], w).context == 68  # 16 lines x 4 + 4
    assert binding_context({"binding_programs": {"n_lines": 40}}, ["binding_programs"], w).context == 128
    assert binding_context(params, ["grounding_train"], w) is w  # not a binding stage


def test_each_study_is_its_stages_starts_its_training_and_its_analyses_by_hand():
    """The default's binding_patching@0 by hand: 200 pairs, each patched at every (layer, position)
    of 9 x 68 and every (layer, head, hop) of 8 x 4 x 4, is 200 x 740 = 148,000 forward passes of 68
    tokens; a pass is 2 FLOPs a weight a token (W = 8 x (4 x 64 x 64 + 2 x 64 x 256) = 393,216) and the
    attention scores (4 x 8 x 68 x 64 a token): 68 x (786,432 + 139,264) = 62,947,328 FLOPs. At 50
    GFLOP/s that is 9.316e12 / 50e9 = 186.3 s, and one checkpoint read."""
    per = estimate(SHIPPED, ROOT, RATES)
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    items = {i: item for name, stage in stages.items() for i, item in instances(name, stage, SHIPPED)}
    for study, s in per.items():
        trained = [w for _, st, w in jobs(SHIPPED, ROOT) if st == study and w is not None]
        train = sum(w.steps * (STEP_S + w.flops_per_step / RATES.flops) for w in trained)
        spent = sum(
            analysis(i, items[i], SHIPPED, ROOT).seconds(RATES) for i, st, _ in jobs(SHIPPED, ROOT) if st == study
        )
        assert s["training_s"] == pytest.approx(train)
        assert s["analysis_s"] == pytest.approx(spent)
        assert s["total_s"] == pytest.approx(s["stages"] * (3.0 + ENGINE_S["dvc"]) + train + spent)
    # the default's one binding training: 13,000 steps of 32 programs of 68 tokens through 8 layers
    w = Workload(n_layers=8, d_model=64, d_mlp=256, d_attn=64, n_heads=4, context=68, batch=32, steps=13_000)
    assert per["binding"]["training_s"] == pytest.approx(13_000 * (STEP_S + w.flops_per_step / 50e9))
    patching = analysis("binding_patching@0", {"seed": 0}, SHIPPED, ROOT)
    assert patching.flops == 148_000 * 68 * (2 * 393_216 + 4 * 8 * 68 * 64)
    assert patching.seconds(RATES) == pytest.approx(148_000 * 62_947_328 / 50e9 + CKPT_S)


def test_an_analysis_costs_more_for_a_wider_model_and_more_checkpoints():
    """grounding_gain of one run: its held-out pairs through each checkpoint the run saves."""
    item = {"model": "transformer4", "seed": 0}
    base = analysis("grounding_gain@transformer4-0", item, SHIPPED, ROOT)
    wider = copy.deepcopy(SHIPPED)
    wider["grounding_models"]["transformer4"].update(d_model=128, d_mlp=512, d_head=32)
    denser = copy.deepcopy(SHIPPED)
    denser["grounding_train"]["checkpoint_every"] = 75  # twice the checkpoints
    w, d = (
        analysis("grounding_gain@transformer4-0", item, wider, ROOT),
        analysis("grounding_gain@transformer4-0", item, denser, ROOT),
    )
    assert w.checkpoints == base.checkpoints and 3.5 < w.flops / base.flops < 4  # weights 4x, scores 2x
    assert d.checkpoints > base.checkpoints  # 32 against 22 (log-spaced ones among the new)
    assert d.flops / base.flops == pytest.approx(d.checkpoints / base.checkpoints)
    assert d.seconds(RATES) > base.seconds(RATES) and w.seconds(RATES) > base.seconds(RATES)
    # a Mamba-2 pads its 16 tokens to whole chunks and is slower a FLOP; a stage that reads none costs none
    mamba = analysis("grounding_gain@mamba4-0", {"model": "mamba4", "seed": 0}, SHIPPED, ROOT)
    assert mamba.flops > base.flops
    assert analysis("grounding_vocab", {}, SHIPPED, ROOT).seconds(RATES) == 0.0


@pytest.mark.parametrize("saved, kept", [(10, 4), (11, 5), (12, 5)])
def test_an_llc_run_reads_every_kth_checkpoint_and_the_last(saved, kept):
    """Steps 0, 100, ..., 100 (saved - 1) saved; llc.every 3 keeps indices 0, 3, 6, 9 and the last one:
    10 -> 0 3 6 9, 11 -> 0 3 6 9 10, 12 -> 0 3 6 9 11. Each kept checkpoint runs llc.num_chains chains."""
    params = copy.deepcopy(SHIPPED)
    params["binding_train"].update(steps=100 * (saved - 1), checkpoint_every=100, dense_until=0, n_log_checkpoints=0)
    params["llc"]["every"] = 3
    a = analysis("binding_llc@0", {"seed": 0}, params, ROOT)
    assert (a.checkpoints, a.chains) == (kept, kept * params["llc"]["num_chains"])


def test_a_tuned_lens_is_trained_on_its_n_checkpoints_not_on_every_saved_one():
    item, params = {"model": "transformer4", "seed": 0}, copy.deepcopy(SHIPPED)
    params["grounding_lens"]["n_checkpoints"] = 3  # of the 22 a grounding_train run saves
    three = analysis("grounding_lens@transformer4-0", item, params, ROOT)
    params["grounding_lens"]["n_checkpoints"] = 6
    six = analysis("grounding_lens@transformer4-0", item, params, ROOT)
    assert (three.checkpoints, six.checkpoints) == (3, 6) and six.flops == pytest.approx(2 * three.flops)


def test_saliency_is_a_forward_and_backward_pass_per_matched_context_only():
    """grounding_gain passes each held-out context matched and n_mismatched times mismatched; saliency
    passes only the matched ones, each forward and backward (3 forwards' FLOPs)."""
    item, params = {"model": "transformer4", "seed": 0}, copy.deepcopy(SHIPPED)
    params["grounding_eval"]["n_mismatched"] = 4
    gain = analysis("grounding_gain@transformer4-0", item, params, ROOT)
    saliency = analysis("grounding_saliency@transformer4-0", item, params, ROOT)
    assert saliency.checkpoints == gain.checkpoints and saliency.flops == pytest.approx(3 * gain.flops / 5)


def test_snakemake_costs_less_per_stage_than_dvc_and_a_faster_machine_less_training():
    dvc, snake = estimate(SHIPPED, ROOT, RATES), estimate(SHIPPED, ROOT, RATES, "snakemake")
    n = sum(s["stages"] for s in dvc.values())
    total = {name: sum(s["total_s"] for s in e.values()) for name, e in (("dvc", dvc), ("snakemake", snake))}
    assert total["dvc"] - total["snakemake"] == pytest.approx(n * (ENGINE_S["dvc"] - ENGINE_S["snakemake"]))
    fast = estimate(SHIPPED, ROOT, Rates(flops=100e9, start_s=3.0))
    assert fast["binding"]["training_s"] < dvc["binding"]["training_s"]
    assert fast["pipeline"] == dvc["pipeline"]  # nothing there trains


def test_the_full_profile_costs_what_it_adds():
    default = estimate(SHIPPED, ROOT, RATES)
    full = estimate(with_profiles(["full"]), ROOT, RATES)
    # a second binding seed, three aid trainings: four times the default's training more
    assert full["binding"]["training_s"] == pytest.approx(5 * default["binding"]["training_s"])
    assert full["grounding"]["stages"] == default["grounding"]["stages"] + 2  # two LLC runs


@pytest.mark.parametrize("run", RUNS, ids=lambda r: "+".join(r["profiles"]) or "default")
def test_the_estimate_is_within_half_of_each_recorded_run(run):
    """Today's estimate for that run's params at the rates measured right after it."""
    per = estimate(with_profiles(run["profiles"]), ROOT, Rates(**run["rates"]), run["engine"])
    total = sum(s["total_s"] for s in per.values())
    assert 0.5 <= total / run["wall_s"] <= 1.5, (total, run["wall_s"])


def test_recorded_runs_cover_the_tiny_the_paper_smoke_and_the_default_profile():
    assert {tuple(r["profiles"]) for r in RUNS} >= {("tiny",), (), ("paper", "paper_smoke")}


def test_the_rates_are_the_probes_flops_over_its_timed_steps_and_one_timed_start(monkeypatch):
    """A scripted clock (0.25 s a reading): two warm-up steps untimed, then steps until `seconds` have
    passed; a stage start is one subprocess run in the checkout. The thread count is put back."""
    import torch

    from emergence import estimate as E

    clock = iter(0.25 * k for k in range(1, 100))
    monkeypatch.setattr(E.time, "perf_counter", lambda: next(clock))
    ran = []
    monkeypatch.setattr(E.subprocess, "run", lambda cmd, cwd, **kw: ran.append((cmd, cwd)))
    before = torch.get_num_threads()
    rates = measure(1, ROOT, seconds=0.5)
    # steps 3 and 4 timed: began at 0.25, the loop ends once 0.75 - 0.25 >= 0.5, read at 1.0 -> 0.375 s a step
    assert rates.flops == pytest.approx(E.PROBE.flops_per_step / (0.375 - STEP_S))
    assert rates.start_s == pytest.approx(0.25)
    ((cmd, cwd),) = ran
    assert cwd == ROOT and "import torch" in cmd[-1] and "load_schemas" in cmd[-1]
    assert torch.get_num_threads() == before


def test_check_prints_the_estimate_after_the_params_pass_and_skips_it_when_asked(monkeypatch, capsys):
    monkeypatch.setattr("emergence.check.measure", lambda threads, root: RATES)
    assert check_main([str(ROOT / "params.yaml"), "--root", str(ROOT)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "ok (" in out[0]  # the params first
    shown = out[out.index(lines(SHIPPED, ROOT, RATES)[0]) :]
    assert shown == lines(SHIPPED, ROOT, RATES)
    assert check_main([str(ROOT / "params.yaml"), "--root", str(ROOT), "--estimate", "snakemake"]) == 0
    assert lines(SHIPPED, ROOT, RATES, "snakemake")[-1] in capsys.readouterr().out
    monkeypatch.setattr("emergence.check.measure", lambda threads, root: pytest.fail("measured"))
    assert check_main([str(ROOT / "params.yaml"), "--root", str(ROOT), "--estimate", "none"]) == 0
    assert "estimated time" not in capsys.readouterr().out


def test_check_passes_params_that_leave_a_default_out_and_says_it_made_no_estimate(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr("emergence.check.measure", lambda threads, root: RATES)
    text = (ROOT / "params.yaml").read_text()
    assert "  n_programs: 1000" in text  # binding_trajectory's, the schema's default
    (tmp_path / "params.yaml").write_text(text.replace("  n_programs: 1000", "", 1))
    assert check_main([str(tmp_path / "params.yaml"), "--root", str(ROOT)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("leaves out 'n_programs' (its default applies)")


@pytest.fixture
def recorded(tmp_path) -> Path:
    """A run folder: the shipped params, dvc.yaml and pipeline.yaml, four successful stage records (DVC's), one without
    its stage (Snakemake's) and a failed one."""
    run_dir = tmp_path / "run"
    (run_dir / "logs" / "stages").mkdir(parents=True)
    for name in ("params.yaml", "dvc.yaml", "pipeline.yaml"):
        (run_dir / name).write_text((ROOT / name).read_text())
    records = {
        "binding_train@0": 1500.0,
        "binding_report": 20.0,
        "assoc_stories": 4.0,
        "visual_train@image-transformer4-0": 60.0,
    }
    for i, (stage, wall) in enumerate(records.items()):
        record = {"stage": stage, "wall_s": wall, "exit": 0, "command": f"python -m stages.x{i}",
                  "started": f"2026-12-06T10:{i:02d}:00Z"}  # fmt: skip
        (run_dir / "logs" / "stages" / f"{i}.json").write_text(json.dumps(record))
    snake = {"stage": None, "wall_s": 7.0, "exit": 0, "started": "2026-12-06T10:20:00Z",
             "command": "python -m stages.grounding.gain --setting childes --model mamba4 --seed 1"}  # fmt: skip
    (run_dir / "logs" / "stages" / "5.json").write_text(json.dumps(snake))  # Snakemake's: no stage, its command
    failed = {"stage": "binding_report", "wall_s": 9.0, "exit": 1, "command": "python -m stages.x9",
              "started": "2026-12-06T10:30:00Z"}  # fmt: skip
    (run_dir / "logs" / "stages" / "9.json").write_text(json.dumps(failed))  # a failed run counts nothing
    return run_dir


def test_a_finished_run_is_recorded_with_its_walls_per_study_and_the_rates_after_it(
    recorded, tmp_path, monkeypatch, capsys
):
    from bench import estimate_record

    run_dir = recorded
    monkeypatch.setattr(estimate_record, "measure", lambda threads, root: RATES)
    monkeypatch.setattr(estimate_record, "RUNS", tmp_path / "runs.json")
    (tmp_path / "runs.json").write_text(
        json.dumps([{"profiles": [], "engine": "dvc", "wall_s": 1}, {"profiles": ["tiny"], "engine": "dvc"}])
    )
    assert estimate_record.main([str(run_dir), "--wall", "3000", "--note", "idle"]) == 0
    runs = json.loads((tmp_path / "runs.json").read_text())
    assert [r["profiles"] for r in runs] == [["tiny"], []]  # the default's entry replaced, the other kept
    entry = runs[-1]
    assert entry["wall_s"] == 3000 and entry["rates"] == {"flops": 50e9, "start_s": 3.0} and entry["note"] == "idle"
    assert entry["studies"]["binding"] == 1520.0 and entry["studies"]["associations"] == 4.0
    assert entry["studies"]["visual"] == 60.0 and entry["studies"]["grounding"] == 7.0  # grounding_gain@mamba4-1
    e = estimate(SHIPPED, ROOT, RATES)["binding"]
    est = e["total_s"] - e["stages"] * ENGINE_S["dvc"]
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("binding "))
    assert f"estimate {est / 60:6.1f} min" in line and line.endswith(f"{est / 1520.0:.2f}x")


def test_without_a_wall_time_the_records_span_is_the_runs(recorded):
    from bench.estimate_record import records_wall

    assert records_wall(recorded) == 30 * 60 + 9.0  # 10:00:00 to the failed stage's end at 10:30:09
