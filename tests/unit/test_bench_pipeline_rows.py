"""bench/pipeline.py in-process: the commands the no-op rows time, the rows built from stage records,
and the CLI a user reads. The engines themselves are stood in for (`run`, `seconds`), so each row's
value is known and the commands are checked as given."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from refusals import assert_names

from bench import pipeline
from bench.table import not_measured, row

UP_TO_DATE = "Data and pipelines are up to date.\n"


def records(root: Path, *recs: dict) -> Path:
    folder = root / "logs" / "stages"
    folder.mkdir(parents=True)
    for i, r in enumerate(recs):
        (folder / f"{i:03d}.json").write_text(json.dumps(r))
    return root


def record(command: str, stage: str, wall_s: float, rss: float, exit: int = 0) -> dict:
    return {"command": command, "stage": stage, "wall_s": wall_s, "max_rss_mb": rss, "exit": exit}


@pytest.fixture
def engines(monkeypatch):
    """`run` answers `dvc status` with up to date; `seconds` times dvc at 1.5 s and snakemake at 0.5 s."""
    calls = []

    def run(cmd, root):
        calls.append(("run", cmd, root))
        return SimpleNamespace(stdout=UP_TO_DATE)

    def seconds(cmd, root, repeats):
        calls.append(("seconds", cmd, root, repeats))
        return {"dvc": 1.5, "snakemake": 0.5}[cmd[0]]

    monkeypatch.setattr(pipeline, "run", run)
    monkeypatch.setattr(pipeline, "seconds", seconds)
    monkeypatch.setattr(pipeline, "memory_mib", lambda: 24576.0)
    return calls


def test_tiny_rows_time_the_no_ops_in_the_run_and_read_its_records(tmp_path, engines):
    root = records(
        tmp_path,
        record("python -m stages.binding.train --seed 0", "binding_train@0", 60.0, 300.0),
        record("python -m stages.binding.data", "binding_data", 5.0, 500.0),
        record("python -m stages.assoc.train", "assoc_train", 9.0, 900.0, exit=1),  # failed: not counted
    )
    rows = pipeline.tiny_rows(root, repeats=4)
    assert engines == [
        ("run", ["dvc", "status"], root),
        ("seconds", ["dvc", "repro"], root, 4),
        ("seconds", ["snakemake", "-n", "--cores", "2", "--quiet"], root, 4),
    ]
    assert rows == [
        row("no-op `dvc repro`, tiny profile", 1.5, "s", target="< 2 s"),
        row("`snakemake -n`, tiny profile", 0.5, "s", "no-op `dvc repro`, same run", 1.5),
        row("peak RSS, binding stages (tiny; largest: binding_data)", 500.0, "MiB", "this machine's memory", 24576.0),
        not_measured("peak RSS, assoc stages (tiny)", "MiB", "no stage record of this study"),
        not_measured("peak RSS, grounding stages (tiny)", "MiB", "no stage record of this study"),
    ]


def test_tiny_rows_refuse_a_run_that_is_not_up_to_date(tmp_path, engines, monkeypatch):
    monkeypatch.setattr(pipeline, "run", lambda cmd, root: SimpleNamespace(stdout="binding_data:\n\tchanged deps\n"))
    with pytest.raises(AssertionError) as e:
        pipeline.tiny_rows(tmp_path, repeats=1)
    head, *status = str(e.value).splitlines()
    assert_names(head, tmp_path, "not up to date")
    assert "binding_data:" in status  # the stages a no-op would run


def test_default_rows_minutes_per_study_or_why_not(tmp_path):
    name = "end-to-end {}, default profile (sum of stage wall times)".format
    llc = "LLC stages of {}, default profile (sum of their wall times)".format
    assert pipeline.default_rows(None) == [
        not_measured(name(s), "min", "no --default-run given") for s in pipeline.STUDIES
    ] + [not_measured(llc(s), "min", "no --default-run given", "<= 0.1x") for s in ("binding", "grounding")]
    root = records(
        tmp_path,
        record("python -m stages.binding.train --seed 0", "binding_train@0", 600.0, 1.0),
        record("python -m stages.binding.llc --seed 0", "binding_llc@0", 60.0, 1.0),
        record("python -m stages.binding.llc --seed 1", "binding_llc@1", 30.0, 1.0),
        record("python -m stages.binding.report", "binding_report", 30.0, 1.0),
        record("python -m stages.grounding.train --model mamba4 --seed 0", "grounding_train@mamba4-0", 120.0, 1.0),
        record("python -m stages.grounding.llc --model mamba4 --seed 0", "grounding_llc@mamba4-0", 9.0, 0.0, exit=1),
        record("python -m stages.index_report", "index_report", 99.0, 1.0),  # no study of the three
    )
    whole = "every stage of the study, the LLC's included (sum of wall times)"
    assert pipeline.default_rows(root) == [
        row(name("binding"), 12.0, "min"),  # (600 + 60 + 30 + 30) s
        not_measured(name("assoc"), "min", f"no stage record of this study in {root}"),
        row(name("grounding"), 2.0, "min"),  # the failed LLC run does not count
        row(llc("binding"), 1.5, "min", whole, 12.0, "<= 0.1x"),  # 90 s of 720 s: 0.125x, missed
        not_measured(llc("grounding"), "min", "no LLC stage record", "<= 0.1x"),
    ]
    assert [r["met"] for r in pipeline.default_rows(root)[3:]] == [False, None]


def test_rows_of_a_given_tiny_run_add_the_default_runs_minutes(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "tiny_rows", lambda root, repeats: [("tiny", root, repeats)])
    default = records(tmp_path / "default", record("python -m stages.assoc.train", "assoc_train", 120.0, 1.0))
    args = argparse.Namespace(tiny_run=tmp_path / "tiny", default_run=default, repeats=2)
    out = pipeline.rows(args)
    assert out[0] == ("tiny", tmp_path / "tiny", 2)
    assert out[2] == row("end-to-end assoc, default profile (sum of stage wall times)", 2.0, "min")


def test_rows_without_a_tiny_run_build_one_in_a_named_temporary_copy(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline, "project_copy", lambda tmp: calls.append(("copy", tmp)) or tmp / "project")
    monkeypatch.setattr(pipeline, "run", lambda cmd, root: calls.append(("run", cmd, root)))
    monkeypatch.setattr(pipeline, "tiny_rows", lambda root, repeats: [("tiny", root, repeats)])
    default = records(tmp_path, record("python -m stages.grounding.train", "grounding_train", 60.0, 1.0))
    out = pipeline.rows(argparse.Namespace(tiny_run=None, default_run=default, repeats=5))
    (_, tmp), (_, cmd, root) = calls
    assert tmp.name.startswith("bench-tiny-") and root == tmp / "project" and cmd == ["dvc", "repro"]
    assert out[0] == ("tiny", tmp / "project", 5)
    assert out[3] == row("end-to-end grounding, default profile (sum of stage wall times)", 1.0, "min")
    assert not tmp.exists()  # the copy goes with the run


def test_the_command_line_and_its_help(capsys):
    args = pipeline.parse_args(["--tiny-run", "t", "--default-run", "d"])
    assert (args.tiny_run, args.default_run, args.repeats) == (Path("t"), Path("d"), 3)
    with pytest.raises(SystemExit):
        pipeline.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines to the terminal
    for line in [
        pipeline.__doc__.splitlines()[0],
        "--default-run DEFAULT_RUN checkout of a finished default-profile run",
        "--tiny-run TINY_RUN checkout of a finished tiny run (default: run one now)",
        "--repeats REPEATS timed no-op runs of each engine (median)",
    ]:
        assert " ".join(line.split()) in text


def test_study_of_a_command():
    assert pipeline.study_of("python -m stages.binding.train --seed 0") == "binding"
    assert pipeline.study_of("python -m stages.index_report") == "index"
    assert pipeline.stage_records(Path("/nonexistent")) == []
