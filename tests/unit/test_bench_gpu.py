"""The GPU check in its CPU smoke mode: every measurement runs, the JSON and the page section are whole,
and the numbers hang together (the prediction is the step time times a seed's steps)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from refusals import refuses

from bench import gpu, gpu_rows

ARCHS = ["binding GPT-2", "grounding Transformer", "grounding Mamba-2", "grounding LSTM", "association attention-only"]


def _bf16_lstm_runs_here() -> bool:
    """oneDNN builds a bf16 LSTM only on CPUs with bf16 instructions (AVX-512 BF16, AMX). Probed apart from
    the bench, so the test knows which rows this machine can measure without asking the code under test."""
    lstm = torch.nn.LSTM(4, 4, batch_first=True)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.zeros(1, 2, 4))
    except RuntimeError:
        return False
    return True


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpu_check")
    doc = d / "bench.md"
    doc.write_text(f"# Bench\n\nbefore\n\n{gpu.MARKERS[0]}\nold section\n{gpu.MARKERS[1]}\n\nafter\n")
    args = ["--device", "cpu", "--smoke", "--steps", "1", "--rounds", "1", "--binding-s", "2"]
    gpu.main([*args, "--out", str(d / "gpu_check.json"), "--doc", str(doc)])
    return json.loads((d / "gpu_check.json").read_text()), doc.read_text()


def test_every_architecture_is_measured_in_both_precisions(smoke):
    result, _ = smoke
    got = [(r["model"], r["precision"], r["compiled"]) for r in result["architectures"]]
    lstm_bf16 = _bf16_lstm_runs_here()
    expected = (  # eager rows first: seconds each, where a compiled one takes a minute on a GPU
        [(m, "bf16", False) for m in ARCHS if lstm_bf16 or m != "grounding LSTM"]
        + [("grounding Mamba-2 (torch path)", "bf16", False)]
        + [(m, "fp32", False) for m in ARCHS]
        + [("binding GPT-2", "bf16", True)]
    )
    assert got == expected
    failed = [n for n in result["not_measured"] if n.startswith("grounding LSTM bf16 eager: RuntimeError")]
    assert len(failed) == (0 if lstm_bf16 else 1)  # a row this CPU cannot run is listed with its error, not dropped
    for r in result["architectures"]:
        assert math.isfinite(r["tokens_per_s"]) and math.isfinite(r["tflops"]) and r["estimate_mib"] > 0
        assert r["mfu"] is None and r["peak_mem_mib"] is None  # no GPU: no peak to divide by, no device memory
    forwards = {(r["model"], r["compiled"]): r["forward"] for r in result["architectures"]}
    assert forwards[("binding GPT-2", True)] == "compiled (default)"  # what ran, not only what was asked
    assert forwards[("binding GPT-2", False)] == "eager"
    mamba = next(r for r in result["architectures"] if r["model"] == "grounding Mamba-2")
    assert mamba["kernels"] == {"mamba2.scan": "torch", "mamba2.chunk_scan": "torch", "mamba2.conv1d": "torch"}
    skipped = [n for n in result["not_measured"] if "--smoke compiles" in n]
    assert len(skipped) == 9  # 4 other architectures in bf16, all 5 in fp32


def test_the_binding_prediction_is_its_step_time_times_a_seed(smoke):
    (b,) = smoke[0]["binding_run"]  # smoke: one run, eager, whatever --compile-modes says
    assert b["steps"] >= 1 and b["precision"] == "bf16" and b["compiled"] is False and b["compile_mode"] is None
    assert b["forward"] == "eager"
    assert b["predicted_seed_min"] == pytest.approx(b["step_s"] * 105_469 / 60)
    assert 0 <= b["held_out_accuracy"] <= 1 and math.isfinite(b["first_loss"])


def test_seeds_hf_and_mamba_rows(smoke):
    result, _ = smoke
    seeds = result["seeds_per_device"]
    assert [r["k"] for r in seeds] == [1, 2] and seeds[0]["vs_one_seed"] == 1.0
    for r in seeds:
        assert len(r["steps_per_s"]) == r["k"]
        minutes = 105_469 / min(r["steps_per_s"]) / 60
        assert r["minutes_for_k_seeds"] == pytest.approx(minutes)
        assert r["seeds_per_hour"] == pytest.approx(60 / minutes * r["k"])
    (hf,) = result["hf_gpt2"]
    assert hf["compiled"] is False and hf["ratio"] == pytest.approx(hf["ours_tokens_per_s"] / hf["hf_tokens_per_s"])
    m = result["mamba_kernels"]
    assert m["max_abs_logit_diff"] == 0.0 and m["loss_diff"] == 0.0  # both paths are torch on a CPU
    assert result["versions"]["packages"]["torch"]["machine"] == torch.__version__
    assert "mamba_ssm" in result["versions"]["extras"]
    assert result["device"].startswith("CPU: ") and result["peak_bf16_tflops"] is None


def test_the_step_profile_ranks_the_ops_and_adds_up(smoke):
    p = smoke[0]["step_profile"]
    assert p["model"] == "binding GPT-2" and p["compiled"] is False and math.isfinite(p["wall_ms"])
    assert p["device_busy_ms"] is None and p["kernels_per_step"] is None  # no GPU: CPU ops stand in
    ms = [t["ms"] for t in p["top"]]
    assert len(ms) == 8 and ms == sorted(ms, reverse=True) and all(math.isfinite(t) for t in ms)
    assert any("mm" in t["name"] for t in p["top"])  # a transformer step's time is in its matmuls
    assert "Where a binding GPT-2 step's time goes (bf16, eager)" in smoke[1]


def test_the_page_section_is_replaced_and_nothing_else(smoke):
    result, page = smoke
    before, rest = page.split(gpu.MARKERS[0])
    section, after = rest.split(gpu.MARKERS[1])
    assert before == "# Bench\n\nbefore\n\n" and after == "\n\nafter\n"
    assert "old section" not in page and "(smoke: code path only)" in section
    assert section.count("\n| ") == len(result["architectures"]) + 1  # the header, then one line per row
    assert (
        gpu.MARKERS[0] + gpu.render(result).split(gpu.MARKERS[0])[1] == gpu.MARKERS[0] + section + gpu.MARKERS[1] + "\n"
    )


def test_write_doc_appends_a_section_to_a_page_without_one(tmp_path):
    page = tmp_path / "bench.md"
    page.write_text("# Bench\n\ntext\n")
    gpu.write_doc(f"{gpu.MARKERS[0]}\nnew\n{gpu.MARKERS[1]}\n", page)
    assert page.read_text() == f"# Bench\n\ntext\n\n{gpu.MARKERS[0]}\nnew\n{gpu.MARKERS[1]}\n"
    gpu.write_doc(f"{gpu.MARKERS[0]}\nnewer\n{gpu.MARKERS[1]}\n", page)
    assert page.read_text() == f"# Bench\n\ntext\n\n{gpu.MARKERS[0]}\nnewer\n{gpu.MARKERS[1]}\n"


def test_the_torch_path_is_restored_after_an_error():
    from transformers.models.mamba2 import modeling_mamba2

    before = {name: getattr(modeling_mamba2, name) for name in gpu_rows.KERNEL_ENTRY_POINTS.values()}
    with pytest.raises(RuntimeError), gpu_rows.torch_path():
        assert all(getattr(modeling_mamba2, n) is fn.__wrapped__ for n, fn in before.items())
        raise RuntimeError
    assert {name: getattr(modeling_mamba2, name) for name in before} == before


def test_the_paper_shapes_are_the_paper_profiles():
    binding, transformer, mamba, lstm, attn = gpu_rows.specs(gpu_rows.paper_params(), smoke=False)
    assert (binding.config["n_layers"], binding.config["d_model"], binding.batch, binding.seq) == (12, 512, 64, 128)
    assert (transformer.config["n_layers"], transformer.config["d_model"], transformer.seq) == (12, 768, 256)
    assert (mamba.arch, mamba.config["d_model"], lstm.arch, lstm.config["d_model"]) == ("mamba2", 768, "lstm", 768)
    assert (attn.arch, attn.config["d_vocab"], attn.seq) == ("attn_only", 3000, 200)


def test_a_failed_or_late_measurement_is_named_and_the_rest_still_run(monkeypatch):
    # The check gets one call on a lent GPU: an error in one task, or the budget, must not lose the others.
    clock = iter(range(0, 10_000, 10))  # every perf_counter call advances 10 s
    monkeypatch.setattr(gpu.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(gpu, "binding_run", lambda *a: {"ok": 1})
    monkeypatch.setattr(gpu, "hf_gpt2_rows", lambda *a: [])
    monkeypatch.setattr(gpu, "seeds_on_one_device", lambda *a: [])
    monkeypatch.setattr(gpu, "step_profile", lambda *a: {})

    def boom(*a):
        raise RuntimeError("mamba_ssm kernel failed\ntraceback")

    monkeypatch.setattr(gpu, "mamba_check", boom)
    monkeypatch.setattr(gpu, "arch_row", lambda spec, p, c, *a: {"model": spec.name, "precision": p, "compiled": c})
    a = gpu.parse_args(["--device", "cpu", "--budget-s", "185"])
    saved = []  # what a call cut off at its limit would have left on disk after each save
    result = gpu.run(a, lambda r: saved.append(json.loads(json.dumps(r))))
    assert saved[0]["binding_run"] == [] and saved[1]["binding_run"] == [{"ok": 1}]  # saved as soon as measured
    assert saved[3]["binding_run"] == [{"ok": 1}] * 2  # one run per compile mode: default, reduce-overhead
    assert saved[6]["not_measured"] == ["mamba_kernels: RuntimeError: mamba_ssm kernel failed"]
    assert len(saved) == 2 * 5 + 1 + 1 and saved[-1] == result  # the last save holds the rows the budget left
    assert result["binding_run"] == [{"ok": 1}] * 2 and "mamba_kernels" not in result
    assert result["not_measured"][0] == "mamba_kernels: RuntimeError: mamba_ssm kernel failed"
    assert result["task_s"]["mamba_kernels"] == 10  # timed even when it fails
    # start at 0; each task reads the clock three times (budget check, start, end): the checks read 10,
    # 40, ..., 160 (<= 185: the six study-level tasks run), then 190 > 185: every architecture is left
    measured = [r["model"] for r in result["architectures"]]
    assert measured == [] and len(result["not_measured"]) == 1 + 21
    assert result["not_measured"][1] == "binding GPT-2 bf16 eager: budget of 185 s spent"


def test_every_paper_shape_builds_and_runs_a_step():
    # The paper shapes had never been built before a GPU run: three of five failed there on a config key.
    for spec in gpu_rows.specs(gpu_rows.paper_params(), smoke=False):
        model = spec.build("cpu")
        idx = torch.randint(spec.config["d_vocab"], (1, 8))
        assert model(idx)[0].shape == (1, 8, spec.config["d_vocab"]), spec.name


def test_only_runs_the_named_measurements(monkeypatch):
    monkeypatch.setattr(gpu, "binding_run", lambda *a: pytest.fail("not asked for"))
    monkeypatch.setattr(gpu, "mamba_check", lambda *a: {"ok": 1})
    monkeypatch.setattr(gpu, "seeds_on_one_device", lambda a, device, counts: [{"counts": counts}])
    args = ["--device", "cpu", "--only", "mamba_kernels,seeds_per_device", "--seed-counts", "1,6"]
    result = gpu.run(gpu.parse_args(args))
    assert result["mamba_kernels"] == {"ok": 1} and result["seeds_per_device"] == [{"counts": (1, 6)}]
    assert result["architectures"] == [] and list(result["task_s"]) == ["mamba_kernels", "seeds_per_device"]
    with refuses("--only", "unknown", "seeds_per_device", error=SystemExit) as e:  # and the known ones
        gpu.run(gpu.parse_args(["--device", "cpu", "--only", "seeds"]))
    assert "seeds" in str(e.value).replace("seeds_per_device", "")  # the one asked for


def test_a_nan_measurement_is_saved_as_null_and_the_run_goes_on(tmp_path, monkeypatch):
    nan = {"kernels": {}, "max_abs_logit_diff": float("nan"), "loss_diff": float("inf")}
    monkeypatch.setattr(gpu, "mamba_check", lambda *a: nan)
    out = tmp_path / "gpu_check.json"
    gpu.main(["--device", "cpu", "--only", "mamba_kernels", "--out", str(out), "--doc", str(tmp_path / "b.md")])
    assert json.loads(out.read_text())["mamba_kernels"] == {
        "kernels": {},
        "max_abs_logit_diff": None,
        "loss_diff": None,
    }
