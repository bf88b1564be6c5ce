"""The single benchmarks as programs (`python -m bench.<name>`): their flags and defaults (the sizes that
docs/bench.md states and `make bench` measures, as bench/__main__.py calls parse_args([])), their --help,
and what main(argv) prints for the row it measured."""

from __future__ import annotations

import argparse
import io
import json
import math
import re
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

import bench.__main__ as runner
import bench.assoc_basis as assoc_basis
import bench.dino_cache as dino_cache
import bench.pipeline as pipeline
import bench.saliency as saliency
import bench.train_throughput as train_throughput
from bench.table import not_measured, render, row
from tests.conftest import ROOT, help_text, help_words, summary_line

DOC = (ROOT / "docs/bench.md").read_text()


def flags(**kw) -> list[str]:
    return [f"--{k.replace('_', '-')}={v}" for k, v in kw.items()]


@pytest.mark.parametrize(
    "module", [saliency, dino_cache, assoc_basis, train_throughput, runner], ids=lambda m: m.__name__
)
def test_help_opens_with_the_docstrings_first_line(module, capsys):
    assert summary_line(module) in help_text(lambda: module.parse_args(["--help"]), capsys)


# --- bench/saliency.py -----------------------------------------------------


def test_saliency_defaults_are_the_documented_size():
    defaults = vars(saliency.parse_args([]))
    assert defaults == {"layers": 12, "d_model": 256, "seq": 64, "batch": 16, "batches": 4, "threads": 2}
    assert "(12 layers, d 256, seq 64)" in DOC


def test_saliency_flags():
    got = saliency.parse_args(flags(layers=3, d_model=128, seq=9, batch=5, batches=2, threads=1))
    assert vars(got) == {"layers": 3, "d_model": 128, "seq": 9, "batch": 5, "batches": 2, "threads": 1}


def test_saliency_main_prints_the_setting_both_rates_and_the_speed_up(monkeypatch, capsys, threads):
    seen = []
    r = row("attention saliency", 65.34, "examples/s", "per-layer loop", 4.07)
    monkeypatch.setattr(saliency, "measure", lambda args: seen.append(args) or r)
    saliency.main(flags(layers=3, d_model=128, seq=9, batch=5, batches=2, threads=1))
    assert threads == [1] and vars(seen[0])["layers"] == 3 and vars(seen[0])["batches"] == 2
    assert capsys.readouterr().out.splitlines() == [
        "3 layers, d_model 128, seq 9, batch 5, threads 1",
        "one backward pass:               65.3 examples/s",  # labels padded to the longer one plus its colon
        "per-layer loop, retain_grad:      4.1 examples/s",
        "speed-up: 16.05x",  # 65.34 / 4.07
    ]


def test_saliency_main_measures_a_tiny_model(capsys, one_thread):
    saliency.main(flags(layers=1, d_model=64, seq=4, batch=2, batches=1, threads=1))
    setting, ours, loop, speed = capsys.readouterr().out.splitlines()
    assert setting == "1 layers, d_model 64, seq 4, batch 2, threads 1"
    rates = [
        re.fullmatch(rf"{label}: +(\S+) examples/s", line)[1]
        for label, line in (("one backward pass", ours), ("per-layer loop, retain_grad", loop))
    ]
    ratio = re.fullmatch(r"speed-up: (\S+)x", speed)[1]
    assert all(math.isfinite(float(x)) for x in (*rates, ratio))  # measured here: numbers, not a speed


# --- bench/dino_cache.py ---------------------------------------------------


def test_dino_defaults_are_the_documented_setting():
    defaults = vars(dino_cache.parse_args([]))
    assert defaults == {"images": 32, "batch": 16, "image_size": 112, "pool_grid": 4, "threads": 2}
    assert "batch 16, into an empty cache (random-init encoder, 112 px)" in DOC


def test_dino_flags():
    got = dino_cache.parse_args(flags(images=5, batch=3, image_size=56, pool_grid=2, threads=1))
    assert vars(got) == {"images": 5, "batch": 3, "image_size": 56, "pool_grid": 2, "threads": 1}


def test_dino_main_prints_the_setting_both_rates_and_the_speed_up(monkeypatch, capsys, threads):
    seen = []
    r = row("DINOv2 features, batch 3 (enc, 5 images 56px)", 73.04, "images/s", "one at a time", 40.6)
    monkeypatch.setattr(dino_cache, "measure", lambda args: seen.append(args) or r)
    dino_cache.main(flags(images=5, batch=3, image_size=56, pool_grid=2, threads=1))
    assert threads == [1] and vars(seen[0]) == {"images": 5, "batch": 3, "image_size": 56, "pool_grid": 2, "threads": 1}
    assert capsys.readouterr().out.splitlines() == [
        "DINOv2 features, batch 3 (enc, 5 images 56px), pool_grid 2, threads 1",
        "batch 3:           73.0 images/s",  # "batch 3:" padded to 14, a blank, then 8 wide
        "one at a time:     40.6 images/s",
        "speed-up: 1.80x",  # 73.04 / 40.6
    ]


# --- bench/assoc_basis.py --------------------------------------------------


def test_assoc_basis_defaults_are_the_documented_size():
    assert vars(assoc_basis.parse_args([])) == {"T": 200, "V": 3000, "sequences": 64, "threads": 2}
    assert r"(T 200, \|V\| 3000, 64 sequences)" in DOC


def test_assoc_basis_flags():
    got = assoc_basis.parse_args(["--T", "6", "--V", "9", "--sequences", "4", "--threads", "1"])
    assert vars(got) == {"T": 6, "V": 9, "sequences": 4, "threads": 1}


def test_assoc_basis_main_prints_both_times_the_speed_up_and_the_difference(monkeypatch, capsys, threads):
    seen = []
    r = row("basis", 0.379, "s", "Jacobian", 5.82, ">= 10x", ratio=5.82 / 0.379)
    monkeypatch.setattr(assoc_basis, "measure", lambda args: seen.append(args) or (r, 3.2e-8))
    assoc_basis.main(["--T", "6", "--V", "9", "--sequences", "4", "--threads", "1"])
    assert threads == [1] and vars(seen[0]) == {"T": 6, "V": 9, "sequences": 4, "threads": 1}
    assert capsys.readouterr().out.splitlines() == [
        "T=6 |V|=9 sequences=4 threads=1",
        "O(T^2) score gradient:        0.379 s",
        "T x T x T Jacobian method:    5.820 s",
        "speed-up: 15.4x   max relative difference: 3.20e-08",  # 5.82 / 0.379
    ]


def test_assoc_basis_main_measures_a_tiny_corpus(capsys, one_thread):
    assoc_basis.main(["--T", "6", "--V", "9", "--sequences", "4", "--threads", "1"])
    head, fast, ref, last = capsys.readouterr().out.splitlines()
    assert head == "T=6 |V|=9 sequences=4 threads=1"
    t_fast = re.fullmatch(r"O\(T\^2\) score gradient: +(\S+) s", fast)[1]
    t_ref = re.fullmatch(r"T x T x T Jacobian method: +(\S+) s", ref)[1]
    speed, diff = re.fullmatch(r"speed-up: (\S+)x   max relative difference: (\S+)", last).groups()
    # the times and their ratio are whatever this machine measured (bench/ reads them): here only numbers
    assert all(math.isfinite(float(x)) for x in (t_fast, t_ref, speed))
    assert float(diff) < 1e-9  # both methods give the same Q and Delta


# --- bench/pipeline.py -----------------------------------------------------


def test_pipeline_main_prints_each_row_and_its_bound(monkeypatch, capsys, tmp_path):
    seen = []
    rows = [
        row("no-op `dvc repro`, tiny profile", 4.12, "s", target="< 2 s", bound="33% of it is DVC parsing YAML"),
        row("`snakemake -n`, tiny profile", 3.82, "s", "no-op `dvc repro`, same run", 4.12),
        not_measured("end-to-end binding, default profile", "min", "no --default-run given"),
    ]
    monkeypatch.setattr(pipeline, "rows", lambda args: seen.append(args) or rows)
    pipeline.main(["--tiny-run", str(tmp_path), "--repeats", "2"])
    assert seen == [argparse.Namespace(default_run=None, tiny_run=tmp_path, repeats=2)]
    assert capsys.readouterr().out.splitlines() == [
        "no-op `dvc repro`, tiny profile: 4.12 s  (33% of it is DVC parsing YAML)",
        "`snakemake -n`, tiny profile: 3.82 s  ()",  # no bound: nothing in the brackets
        "end-to-end binding, default profile: None min  (not measured: no --default-run given)",
    ]


# --- bench/train_throughput.py ---------------------------------------------


def test_train_throughput_defaults_are_the_documented_setting(capsys):
    defaults = vars(train_throughput.parse_args([]))
    assert defaults == {
        "steps": 5, "rounds": 3, "warmup": 2, "batch": 16, "seq": 128, "d_model": 128, "layers": 4, "heads": 4,
        "threads": 2,
    }  # fmt: skip
    assert "3 rounds x 5 steps after 2 warm-up steps" in DOC
    assert "(pos learned, d_model 128, 4 layers, 4 heads, seq 128, batch 16, vocab 41)" in DOC
    with pytest.raises(SystemExit):
        train_throughput.parse_args(["--help"])
    assert re.search(r"--steps STEPS\s+timed steps per round", capsys.readouterr().out)


def test_train_throughput_flags():
    given = {"steps": 1, "rounds": 2, "warmup": 0, "batch": 3, "seq": 7, "d_model": 8, "layers": 1, "heads": 2}
    assert vars(train_throughput.parse_args(flags(**given, threads=1))) == {**given, "threads": 1}


# --- bench/__main__.py: every benchmark, one table --------------------------------------------------------


def test_the_runner_takes_a_subset_in_the_order_given_and_refuses_an_unknown_name(capsys):
    assert vars(runner.parse_args([])) == {
        "default_run": None, "tiny_run": None, "repeats": 3, "only": "training,basis,saliency,dino,pipeline",
        "out": None, "threads": 2,
    }  # fmt: skip
    given = runner.parse_args(["--default-run", "d", "--tiny-run", "t", "--out", "o.json"])
    assert (given.default_run, given.tiny_run, given.out) == (Path("d"), Path("t"), Path("o.json"))
    assert vars(runner.parse_args(["--only", "dino,basis", "--threads", "3", "--repeats", "5"])) == {
        "default_run": None, "tiny_run": None, "repeats": 5, "only": "dino,basis", "out": None, "threads": 3,
    }  # fmt: skip
    with pytest.raises(SystemExit) as e:
        runner.parse_args(["--only", "dino,other,nosuch"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "nosuch, other" in err  # each unknown name, and every known one in order
    assert "training, basis, saliency, dino, pipeline" in err


def test_the_runners_help_says_what_each_option_does(capsys):
    out = help_text(lambda: runner.parse_args(["--help"]), capsys)
    assert {"checkout", "finished", "default-profile", "minutes"} <= help_words(out, "--default-run DEFAULT_RUN")
    assert {"checkout", "finished", "tiny", "default", "now"} <= help_words(out, "--tiny-run TINY_RUN")
    assert {"timed", "no-op", "engine", "median"} <= help_words(out, "--repeats REPEATS")
    assert {"comma-separated", "subset", *runner.BENCHMARKS} <= help_words(out, "--only ONLY")  # the default: every one
    assert {"table", "file", "default", "params.yaml", "paths.bench_report"} <= help_words(out, "--out OUT")


def test_the_runner_names_the_machine_it_measured_on(monkeypatch):
    monkeypatch.setattr(runner.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 6)
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 3 * 2**30 // 4096 + 2**17}  # 3.5 GiB: rounds to 4, not 3
    monkeypatch.setattr(runner.os, "sysconf", pages.__getitem__)
    assert runner.machine() == f"aarch64, 6 cores, 4 GiB, torch {runner.torch.__version__}"


def test_the_runner_writes_the_rows_of_each_benchmark_asked_for_in_that_order(monkeypatch, capsys, tmp_path, threads):
    made = {name: [row(f"{name} {i}", 2.0 + i, "x/s", "ref", 1.0) for i in range(k)] for name, k in
            [("training", 2), ("basis", 1), ("saliency", 1), ("dino", 3), ("pipeline", 1)]}  # fmt: skip
    asked = []
    monkeypatch.setattr(
        runner, "BENCHMARKS", {n: (lambda a, n=n: asked.append((n, a.repeats)) or made[n]) for n in made}
    )
    out = tmp_path / "bench.json"
    runner.main(["--only", "dino,training", "--out", str(out), "--threads", "3", "--repeats", "4"])
    assert asked == [("dino", 4), ("training", 4)] and threads == [3]  # each handed the runner's arguments
    written = json.loads(out.read_text())
    assert [r["benchmark"] for r in written["rows"]] == ["dino 0", "dino 1", "dino 2", "training 0", "training 1"]
    assert written["machine"] == runner.machine() and "torch" in written["machine"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", written["measured"])  # UTC, ISO 8601
    printed = capsys.readouterr().out
    assert printed.index("[bench] dino") < printed.index("[bench] training") and f"written: {out}" in printed
    assert f"measured {written['measured']} on {runner.machine()}" in printed
    assert render(written["rows"]) in printed  # the table, as it was written


def test_the_runner_says_how_long_each_benchmark_took(monkeypatch, capsys, tmp_path, threads):
    clock = iter([100.0, 103.6, 200.0, 200.2])  # dino 3.6 s, training 0.2 s
    monkeypatch.setattr(runner.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(runner, "BENCHMARKS", {n: (lambda a: []) for n in ("dino", "training")})
    monkeypatch.setattr(runner, "write", lambda *a: None)
    runner.main(["--only", "dino,training", "--out", str(tmp_path / "b.json")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["[bench] dino: 4 s", "[bench] training: 0 s"]


def test_the_runner_stamps_the_measurement_in_utc_whatever_the_machines_zone(monkeypatch, tmp_path, threads):
    instant = datetime(2031, 5, 6, 23, 50, 7, tzinfo=UTC)
    local = timezone(timedelta(hours=-7))  # the machine's own zone: None asks for it

    class Clock:
        @staticmethod
        def now(tz=None):
            return instant.astimezone(tz or local)

    monkeypatch.setattr(runner, "datetime", Clock)
    monkeypatch.setattr(runner, "BENCHMARKS", {"dino": lambda a: [row("dino", 2.0, "x/s", "ref", 1.0)]})
    runner.main(["--only", "dino", "--out", str(tmp_path / "b.json")])
    assert json.loads((tmp_path / "b.json").read_text())["measured"] == "2031-05-06T23:50:07Z"


def test_each_benchmarks_time_reaches_a_pipe_before_the_next_benchmark_starts(monkeypatch, tmp_path, threads):
    pipe = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(pipe, encoding="utf-8"))  # block-buffered, as a pipe is
    seen = []
    monkeypatch.setattr(
        runner, "BENCHMARKS", {"dino": lambda a: [], "training": lambda a: seen.append(pipe.getvalue()) or []}
    )
    monkeypatch.setattr(runner, "write", lambda *a: None)
    runner.main(["--only", "dino,training", "--out", str(tmp_path / "b.json")])
    assert len(seen) == 1 and seen[0].startswith(b"[bench] dino: ")


def test_without_out_the_runner_writes_where_params_yaml_says(monkeypatch, tmp_path, threads):
    (tmp_path / "params.yaml").write_text(f"paths:\n  bench_report: {tmp_path / 'here.json'}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner, "BENCHMARKS", {"dino": lambda a: [row("dino", 2.0, "x/s", "ref", 1.0)]})
    runner.main(["--only", "dino"])
    assert (tmp_path / "here.json").is_file()
