"""The bench's measuring functions: what they compute, not how fast. A scripted clock stands in for
time.perf_counter, so every rate, ratio, median and row field is checked exactly; the two sides of a
comparison are checked to compute the same thing on tiny workloads."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image
from refusals import assert_names

import bench.assoc_basis as assoc_basis
import bench.dino_cache as dino_cache
import bench.pipeline as pipeline
import bench.saliency as saliency
from bench.table import KEYS, print_comparison, row
from emergence.core.models.registry import build_model
from emergence.studies.assoc.theory import chunk_rows


class Clock:
    """A perf_counter that only moves when a fake workload says how long it took."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    for module in (assoc_basis, dino_cache, saliency, pipeline):
        monkeypatch.setattr(module, "time", c)
    return c


# --- bench/table.py --------------------------------------------------------


def test_print_comparison_states_setting_both_rates_and_the_ratio(capsys):
    r = row("x", 1234.56, "images/s", "one at a time", 100.0)
    print_comparison("pool_grid 4, threads 2", r, "batch 16", "one at a time")
    assert capsys.readouterr().out.splitlines() == [
        "pool_grid 4, threads 2",
        "batch 16:        1234.6 images/s",  # labels padded to the longer one plus its colon
        "one at a time:    100.0 images/s",
        "speed-up: 12.35x",
    ]


# --- bench/assoc_basis.py --------------------------------------------------


def test_timed_is_the_elapsed_time_and_the_result(clock):
    def work():
        clock.tick(2.5)
        return "out"

    assert assoc_basis.timed(work) == (2.5, "out")


def fake_terms(clock: Clock, seconds: dict, results: dict, calls: list):
    """attention_terms that takes `seconds[score_fn]` and returns `results[score_fn]`."""

    def attention_terms(sequences, G, rows, score_fn):
        calls.append((sequences, G, rows, score_fn))
        clock.tick(seconds[score_fn])
        return results[score_fn]

    return attention_terms


def test_assoc_basis_row_is_the_speed_up_of_ours_over_the_jacobian(clock, monkeypatch):
    fast, ref = assoc_basis.score_gradient, assoc_basis.score_gradient_jacobian
    results = {
        # |Q - Q_ref| / |Q_ref| = 4 / 3; |Delta - Delta_ref| / |Delta_ref| = 3 / 2: the larger is reported
        fast: (torch.tensor([3.0, 4.0]), torch.tensor([2.0, 3.0])),
        ref: (torch.tensor([3.0, 0.0]), torch.tensor([2.0, 0.0])),
    }
    calls = []
    monkeypatch.setattr(assoc_basis, "attention_terms", fake_terms(clock, {fast: 0.5, ref: 6.0}, results, calls))
    r, diff = assoc_basis.measure(argparse.Namespace(T=5, V=7, sequences=3, threads=1))
    assert list(r) == list(KEYS)
    assert r == {
        "benchmark": "association basis Q, Delta (T=5, |V|=7, 3 sequences)",
        "value": 0.5,
        "unit": "s",
        "reference": "T x T x T softmax-Jacobian method, same data, same run",
        "reference_value": 6.0,
        "ratio": 12.0,  # the reference's time over ours
        "target": ">= 10x",
        "met": True,
        "bound": None,
    }
    assert diff == pytest.approx(3 / 2)
    # ours first, then the reference, on the same corpus, scores and chunking
    assert [c[3] for c in calls] == [fast, ref]
    (seq, G, rows, _), (seq_ref, G_ref, rows_ref, _) = calls
    assert np.array_equal(seq, seq_ref) and torch.equal(G, G_ref) and rows == rows_ref == chunk_rows(5)
    rng = np.random.default_rng(0)
    assert np.array_equal(seq, rng.zipf(1.3, size=(3, 6)) % 7)  # T + 1 tokens a sequence, ids below V
    assert torch.equal(G, torch.from_numpy(rng.standard_normal((7, 7))))


def test_assoc_basis_target_not_met_below_ten_times(clock, monkeypatch):
    fast, ref = assoc_basis.score_gradient, assoc_basis.score_gradient_jacobian
    same = (torch.tensor([1.0, 2.0]), torch.tensor([2.0, 1.0]))
    monkeypatch.setattr(
        assoc_basis, "attention_terms", fake_terms(clock, {fast: 1.0, ref: 9.5}, {fast: same, ref: same}, [])
    )
    r, diff = assoc_basis.measure(argparse.Namespace(T=4, V=5, sequences=2, threads=1))
    assert r["ratio"] == 9.5 and r["met"] is False and diff == 0.0


def test_assoc_basis_both_methods_give_the_same_terms(one_thread):
    r, diff = assoc_basis.measure(argparse.Namespace(T=6, V=9, sequences=4, threads=1))
    assert diff < 1e-9
    assert r["ratio"] == pytest.approx(r["reference_value"] / r["value"])


# --- bench/dino_cache.py ---------------------------------------------------


def test_dino_rate_is_images_per_second_of_one_encode(clock, monkeypatch, tmp_path):
    def encode_images(paths, params, encoder, cache_dir):
        clock.tick(2.0)
        return None, {"n_encoded": len(paths)}

    monkeypatch.setattr(dino_cache, "encode_images", encode_images)
    assert dino_cache.rate([tmp_path / f"{i}.png" for i in range(5)], None, None, tmp_path) == 2.5


def test_dino_rate_refuses_a_cache_hit(clock, monkeypatch, tmp_path):
    monkeypatch.setattr(dino_cache, "encode_images", lambda paths, *a: (None, {"n_encoded": len(paths) - 1}))
    with pytest.raises(AssertionError):
        dino_cache.rate([tmp_path / "a.png", tmp_path / "b.png"], None, None, tmp_path)


def test_dino_measure_compares_batched_with_one_at_a_time(clock, monkeypatch):
    loaded, calls = [], []

    encoders = []

    def load_encoder(params, device):
        loaded.append((params, device))
        encoders.append(SimpleNamespace(encoder_id="fake-enc"))
        return encoders[-1]

    def encode_images(paths, params, encoder, cache_dir):
        assert encoder is encoders[-1]  # the loaded encoder, every call: never loaded again inside the timing
        cache_dir = Path(cache_dir)
        images = [np.asarray(Image.open(p)) for p in paths]
        calls.append((len(paths), params, cache_dir.name, cache_dir.exists(), images))
        clock.tick(len(paths) * (0.1 if params.batch_size > 1 else 0.4))  # batched: 4x faster
        return None, {"n_encoded": len(paths)}

    monkeypatch.setattr(dino_cache, "load_encoder", load_encoder)
    monkeypatch.setattr(dino_cache, "encode_images", encode_images)
    r = dino_cache.measure(argparse.Namespace(images=4, batch=3, image_size=32, pool_grid=2, threads=1))
    assert r["benchmark"] == "DINOv2 features, batch 3 (fake-enc, 4 images 32px)"
    assert r["unit"] == "images/s" and r["reference"] == "one image at a time, same encoder, same run"
    assert r["value"] == pytest.approx(10.0) and r["reference_value"] == pytest.approx(2.5)  # 4 / 0.4, 4 / 1.6
    assert r["ratio"] == pytest.approx(4.0) and r["target"] is None and r["met"] is None

    ((params, device),) = loaded
    assert device == "cpu" and params.allow_random_init and (params.image_size, params.pool_grid) == (32, 2)
    # a warm-up of two images, then every image batched, then every image one at a time, each into its
    # own empty cache
    assert [(n, p.batch_size, d, exists) for n, p, d, exists, _ in calls] == [
        (2, 3, "warmup", False),
        (4, 3, "batched", False),
        (4, 1, "single", False),
    ]
    assert all((p.image_size, p.pool_grid, p.allow_random_init) == (32, 2, True) for _, p, *_ in calls)
    images = calls[1][4]
    assert all(a.shape == (120, 160, 3) for a in images)
    assert all(np.array_equal(a, b) for a, b in zip(images, calls[2][4]))  # the same images both ways
    assert not np.array_equal(images[0], images[1])
    calls.clear()  # a second run draws the same images: the row is reproducible
    dino_cache.measure(argparse.Namespace(images=4, batch=3, image_size=32, pool_grid=2, threads=1))
    assert all(np.array_equal(a, b) for a, b in zip(images, calls[1][4]))


# --- bench/saliency.py -----------------------------------------------------


def test_saliency_rate_counts_examples_after_the_warm_up(clock):
    seen = []

    def fn(model, idx, positions, targets):
        seen.append((model, idx, positions, targets))
        clock.tick(0.5)

    batches = [(list(range(n)), f"pos{n}", f"tgt{n}") for n in (2, 5, 4)]
    assert saliency.rate(fn, "model", batches) == pytest.approx(11 / 1.5)  # 2 + 5 + 4 examples in 3 timed calls
    assert seen[0] == ("model", *batches[0])  # the warm-up, untimed
    assert seen[1:] == [("model", *b) for b in batches]


def test_saliency_measure_times_both_methods_on_the_same_batches(clock, monkeypatch, one_thread):
    outputs = {"ours": [], "loop": []}

    def timed(name, fn, seconds):
        def wrapped(model, idx, positions, targets):
            outputs[name].append(((idx, positions, targets), fn(model, idx, positions, targets)))
            clock.tick(seconds)

        return wrapped

    built = []
    monkeypatch.setattr(saliency, "build_model", lambda kind, cfg: built.append((kind, cfg)) or build_model(kind, cfg))
    monkeypatch.setattr(saliency, "head_saliency", timed("ours", saliency.head_saliency, 0.2))
    monkeypatch.setattr(saliency, "head_saliency_per_layer", timed("loop", saliency.head_saliency_per_layer, 1.0))
    r = saliency.measure(argparse.Namespace(layers=2, d_model=128, seq=6, batch=3, batches=2, threads=1))
    assert r["benchmark"] == "attention saliency, all layers and heads (2 layers, d128, seq 6)"
    assert r["unit"] == "examples/s" and r["reference"] == "per-layer loop with retain_grad, same model, same run"
    # 2 timed batches of 3 examples: 6 / (2 x 0.2) and 6 / (2 x 1.0)
    assert r["value"] == pytest.approx(15.0) and r["reference_value"] == pytest.approx(3.0)
    assert r["ratio"] == pytest.approx(5.0)
    assert len(outputs["ours"]) == len(outputs["loop"]) == 3  # warm-up + 2 batches each
    for ((idx, pos, tgt), fast), ((idx2, pos2, tgt2), ref) in zip(outputs["ours"], outputs["loop"]):
        assert torch.equal(idx, idx2) and torch.equal(pos, pos2) and torch.equal(tgt, tgt2)
        assert idx.shape == (3, 6) and int(idx.max()) < 500 and int(tgt.max()) < 500
        assert pos.tolist() == [5, 5, 5]  # the last position predicts
        assert fast.shape == (2, 3, 2, 6, 6)  # layers, batch, d_model // 64 heads, T, T
        assert torch.allclose(fast, ref, atol=1e-6) and fast.abs().sum() > 0
    assert not torch.equal(outputs["ours"][1][0][0], outputs["ours"][2][0][0])  # distinct batches
    # the shape the row names: d_model 128 in heads of 64, a 4x MLP, context = seq, |V| = 500
    cfg = dict(n_layers=2, d_model=128, n_heads=2, d_head=64, d_mlp=512, n_ctx=6, d_vocab=500)
    assert built == [("transformer", cfg)]
    first = [b for b, _ in outputs["ours"]]
    # a second run times the same batches, and so does a model of another depth: they are drawn apart
    # from the weights' init
    for layers in (2, 1):
        outputs["ours"].clear()
        saliency.measure(argparse.Namespace(layers=layers, d_model=128, seq=6, batch=3, batches=2, threads=1))
        again = [b for b, _ in outputs["ours"]]
        assert all(torch.equal(x, y) for b, b2 in zip(first, again, strict=True) for x, y in zip(b, b2, strict=True))


# --- bench/pipeline.py -----------------------------------------------------


def test_memory_mib_is_physical_pages_times_page_size(monkeypatch):
    sizes = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 3 * 2**18}
    monkeypatch.setattr(os, "sysconf", sizes.__getitem__)
    assert pipeline.memory_mib() == 3072.0  # 3 * 2**18 pages of 4 KiB = 3 GiB


def test_seconds_is_the_median_of_the_repeats(clock, monkeypatch, tmp_path):
    durations, calls = iter([6.0, 1.0, 2.0]), []

    def run(cmd, root):
        calls.append((cmd, root))
        clock.tick(next(durations))

    monkeypatch.setattr(pipeline, "run", run)
    assert pipeline.seconds(["dvc", "repro"], tmp_path, 3) == 2.0  # the median; the mean would be 3
    assert calls == [(["dvc", "repro"], tmp_path)] * 3


def test_yaml_bound_is_dvcs_yaml_share_of_the_profiled_run(monkeypatch, tmp_path):
    (tmp_path / "dvc.lock").write_text("a\nb\nc\nd\n")
    stats = {
        ("/venv/dvc/utils/serialize/_yaml.py", 10, "parse_yaml"): (3, 4, 0.1, 0.5, {}),  # 3 primitive calls
        ("/other/serialize/_yaml.py", 20, "parse_yaml"): (2, 2, 0.1, 0.25, {}),
        ("/venv/ruamel/main.py", 5, "parse_yaml"): (7, 7, 0.1, 0.9, {}),  # not DVC's: not counted
        ("/venv/dvc/utils/serialize/_yaml.py", 30, "dump_yaml"): (1, 1, 0.1, 0.8, {}),
        ("~", 0, "<built-in method builtins.exec>"): (1, 1, 0.0, 2.5, {}),  # the whole run
    }
    calls = []

    def run(cmd, root):
        calls.append((cmd, root))
        Path(cmd[cmd.index("-o") + 1]).write_text("profile")

    monkeypatch.setattr(pipeline, "run", run)
    read = []
    monkeypatch.setattr(
        pipeline, "pstats", SimpleNamespace(Stats=lambda path: read.append(path) or SimpleNamespace(stats=stats))
    )
    text = pipeline.yaml_bound(tmp_path)
    assert read == [str(tmp_path / ".bench-noop.prof")]  # the profile this run wrote
    assert text == (
        "30% of it is DVC parsing YAML (5 parses: dvc.yaml, dvc.lock of 4 lines, params.yaml once per stage; "
        "cProfile, same run)"
    )  # (0.5 + 0.25) / 2.5
    ((cmd, root),) = calls
    assert root == tmp_path
    assert cmd == [str(pipeline.BIN / "python"), "-m", "cProfile", "-o", str(tmp_path / ".bench-noop.prof")] + [
        str(pipeline.BIN / "dvc"),
        "repro",
    ]
    assert not (tmp_path / ".bench-noop.prof").exists()  # the profile is removed


def write_records(root: Path, records: list[dict]) -> None:
    folder = root / "logs/stages"
    folder.mkdir(parents=True)
    for i, r in enumerate(records):
        (folder / f"{i}.json").write_text(json.dumps(r))


def fake_tiny(monkeypatch, status: str, times: dict, bound_calls: list) -> None:
    monkeypatch.setattr(pipeline, "run", lambda cmd, root: SimpleNamespace(stdout=status))
    monkeypatch.setattr(pipeline, "seconds", lambda cmd, root, repeats: times[(cmd[0], repeats)])
    monkeypatch.setattr(pipeline, "memory_mib", lambda: 8192.0)
    monkeypatch.setattr(pipeline, "yaml_bound", lambda root: bound_calls.append(root) or "yaml-bound")


def record(command: str, stage: str | None, rss: float, exit: int = 0) -> dict:
    return {"command": command, "stage": stage, "exit": exit, "max_rss_mb": rss, "wall_s": 1.0}


def test_tiny_rows_noop_snakemake_and_peak_rss(monkeypatch, tmp_path):
    write_records(
        tmp_path,
        [
            record("python -m stages.binding.train --seed 0", "binding_train@0", 300.0),
            record("python -m stages.binding.report", None, 450.0),
            record("python -m stages.binding.data", None, 999.0, exit=1),  # failed: not counted
            record("python -m stages.grounding.gain --setting image", "visual_gain@image", 700.0),
        ],
    )
    bound = []
    fake_tiny(monkeypatch, "Data and pipelines are up to date.", {("dvc", 5): 1.5, ("snakemake", 5): 3.0}, bound)
    rows = pipeline.tiny_rows(tmp_path, 5)
    noop, smk, binding, assoc, grounding = rows
    assert noop == row("no-op `dvc repro`, tiny profile", 1.5, "s", target="< 2 s")
    assert noop["met"] is True and bound == []  # met: no profiling of what it is bound by
    assert smk == row("`snakemake -n`, tiny profile", 3.0, "s", "no-op `dvc repro`, same run", 1.5)
    assert smk["ratio"] == 2.0
    assert binding == row(
        "peak RSS, binding stages (tiny; largest: python -m stages.binding.report)",
        450.0,
        "MiB",
        "this machine's memory",
        8192.0,
    )
    assert assoc["value"] is None and assoc["benchmark"] == "peak RSS, assoc stages (tiny)"
    assert assoc["unit"] == "MiB" and assoc["bound"] == "not measured: no stage record of this study"
    assert grounding["value"] == 700.0 and "largest: visual_gain@image" in grounding["benchmark"]


def test_tiny_rows_noop_over_target_says_what_bounds_it(monkeypatch, tmp_path):
    bound = []
    fake_tiny(monkeypatch, "up to date", {("dvc", 1): 2.0, ("snakemake", 1): 1.0}, bound)
    noop = pipeline.tiny_rows(tmp_path, 1)[0]
    assert noop["met"] is False and noop["bound"] == "yaml-bound" and bound == [tmp_path]


def test_tiny_rows_refuse_a_run_that_is_not_up_to_date(monkeypatch, tmp_path):
    fake_tiny(monkeypatch, "train_model: changed deps", {}, [])
    with pytest.raises(AssertionError) as e:
        pipeline.tiny_rows(tmp_path, 1)
    head, *status = str(e.value).splitlines()
    assert_names(head, tmp_path, "not up to date")
    assert "train_model: changed deps" in status  # the stages a no-op would run


def test_rows_of_a_given_tiny_run_and_default_run(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(pipeline, "tiny_rows", lambda root, repeats: calls.append((root, repeats)) or ["tiny"])
    monkeypatch.setattr(pipeline, "default_rows", lambda root: calls.append(root) or ["default"])
    args = pipeline.parse_args(["--tiny-run", str(tmp_path / "t"), "--default-run", str(tmp_path / "d")])
    assert pipeline.rows(args) == ["tiny", "default"]
    assert calls == [(tmp_path / "t", 3), tmp_path / "d"]  # 3 repeats by default


def test_rows_without_a_tiny_run_build_one(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(pipeline, "project_copy", lambda dest: calls.append(("copy", dest)) or dest / "p")
    monkeypatch.setattr(pipeline, "run", lambda cmd, root: calls.append((cmd, root)))
    monkeypatch.setattr(pipeline, "tiny_rows", lambda root, repeats: calls.append((root, repeats)) or ["tiny"])
    monkeypatch.setattr(pipeline, "default_rows", lambda root: calls.append(root) or ["default"])
    assert pipeline.rows(pipeline.parse_args(["--repeats", "2"])) == ["tiny", "default"]
    (_, tmp), repro, tiny, default = calls
    assert repro == (["dvc", "repro"], tmp / "p") and tiny == (tmp / "p", 2) and default is None
    assert not tmp.exists()  # the temporary copy is gone
