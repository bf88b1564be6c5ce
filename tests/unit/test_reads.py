"""What a stage reads is recorded and held against its declaration (core/reads.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import ROOT
from refusals import assert_names

from emergence.core.reads import Reads, declared_paths, undeclared
from emergence.core.stage_record import record_key

WRITE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


def test_only_reads_under_the_working_directory_are_kept(tmp_path, monkeypatch):
    (tmp_path / "venv").mkdir()
    (tmp_path / ".venv").symlink_to(tmp_path / "venv")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / ".venv"))  # a checkout's .venv, a link to a shared one
    reads = Reads(tmp_path)
    events = [
        (tmp_path / "data/in.txt", "r", os.O_RDONLY),
        ("data/rel.txt", None, os.O_RDONLY | os.O_CLOEXEC),  # os.open, relative to the working directory
        (tmp_path / "data/out.txt", "w", WRITE),  # writes are no reads
        (tmp_path / "data/log.txt", "a", os.O_WRONLY | os.O_APPEND),
        (tmp_path / "data/both.bin", "r+", os.O_RDWR),
        (tmp_path.parent / "elsewhere.txt", "r", os.O_RDONLY),  # outside
        (str(tmp_path) + "x/sibling.txt", "r", os.O_RDONLY),  # a sibling sharing the prefix is outside too
        (tmp_path / "src/pkg/__pycache__/m.cpython-311.pyc", "r", os.O_RDONLY),
        (tmp_path / "logs/stages/x.json", "r", os.O_RDONLY),
        (tmp_path / ".dvc/config", "r", os.O_RDONLY),
        (tmp_path / "data/.vocab.json.ab12cd.tmp/vocab.json", "r", os.O_RDONLY),  # io.atomic_path's temporary
        (tmp_path / "data/.runs.x_9.tmp", None, os.O_RDONLY),  # a folder, opened by rmtree to remove it
        ("step0", None, os.O_RDONLY),  # rmtree's name relative to a folder's descriptor, not to the run
        (tmp_path / "data/gone.txt", "r", os.O_RDONLY),  # not there (the open fails)
        (3, "r", os.O_RDONLY),  # a file descriptor
        (tmp_path / ".venv/lib/site-packages/x.py", "r", os.O_RDONLY),  # the interpreter's own files
        (tmp_path / "venv/lib/site-packages/y.py", "r", os.O_RDONLY),
    ]
    for rel in (
        "data/in.txt",
        "data/rel.txt",
        "data/out.txt",
        "data/log.txt",
        "data/both.bin",
        "data/.vocab.json.ab12cd.tmp/vocab.json",
        "src/pkg/__pycache__/m.cpython-311.pyc",
        "logs/stages/x.json",
        ".dvc/config",
        "venv/lib/site-packages/x.py",
        "venv/lib/site-packages/y.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    (tmp_path / "data/.runs.x_9.tmp/step0").mkdir(parents=True)
    (tmp_path.parent / "elsewhere.txt").write_text("")
    Path(str(tmp_path) + "x").mkdir()
    Path(str(tmp_path) + "x/sibling.txt").write_text("")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for path, mode, flags in events:
            reads.hook("open", (path, mode, flags))
        reads.hook("os.listdir", (str(tmp_path / "data/listed"),))
        reads.hook("open", (object(), "r", 0))  # never raises: an audit hook's error would fail the open
    finally:
        os.chdir(cwd)
    assert reads.paths == {"data/in.txt", "data/rel.txt", "data/vocab.json"}
    reads.active = False
    reads.hook("open", (tmp_path / "data/both.bin", "r", os.O_RDONLY))
    assert "data/both.bin" not in reads.paths


def test_a_read_is_declared_inside_a_dep_an_out_or_a_control_file(tmp_path):
    reads = {"data/runs/seed0/step1/model.safetensors", "data/runs2/x", "data/in.txt", "params.yaml", "other.txt"}
    assert undeclared(reads, ["data/runs/seed0", "data/in.txt"], tmp_path) == ["data/runs2/x", "other.txt"]
    assert undeclared(reads, ["data/runs/", "data/runs2/x", "data", "other.txt"], tmp_path) == []
    assert undeclared({"data/in.txt"}, [str(tmp_path / "data")], tmp_path) == []  # an absolute dep
    # a dep's name is no prefix: its sibling folder, or a file named like it with more, is another path
    assert undeclared({"data/runs2/x", "data/in.txt.bak"}, ["data/runs", "data/in.txt"], tmp_path) == [
        "data/in.txt.bak",
        "data/runs2/x",
    ]


DVC = {
    "stages": {
        "train": {
            "matrix": {"seed": "${base.seeds}"},
            "cmd": "python -m stages.train --seed ${item.seed}",
            "deps": ["stages/train.py", "${paths.corpus}", "${weights.dir}"],
            "outs": ["${paths.runs}/seed${item.seed}"],
            "metrics": ["reports/m${item.seed}.json"],
            "meta": {"untracked": ["scratch", "cache"]},
        },
        "report": {"cmd": "python -m stages.report", "deps": ["${paths.runs}"], "outs": ["reports/r.html"]},
    }
}
PARAMS = {
    "base": {"seeds": [0, 7]},
    "paths": {"corpus": "data/c.txt", "runs": "data/runs", "scratch": "data/scratch", "cache": "data/cache"},
    "weights": {"dir": "w"},
}


def test_the_declaration_of_the_instance_running_a_command(tmp_path):
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(DVC))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    assert declared_paths("python -m stages.train --seed 7", tmp_path) == [
        "stages/train.py",
        "data/c.txt",
        "w",
        "data/runs/seed7",
        "reports/m7.json",
        "data/scratch",
        "data/cache",
    ]
    assert declared_paths("python -m stages.report", tmp_path) == ["data/runs", "reports/r.html"]
    assert declared_paths("python -m stages.train --seed 1", tmp_path) is None  # not an instance
    assert declared_paths("python -m stages.train", tmp_path) is None
    (tmp_path / "params.yaml").write_text(": not yaml")
    assert declared_paths("python -m stages.report", tmp_path) is None


def test_a_declaration_that_is_not_utf8_holds_nothing_against_the_reads(tmp_path):
    """The stage has said what is wrong with the file in its one error line; the exit hook adds nothing."""
    for bad in ("params.yaml", "dvc.yaml"):
        (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(DVC))
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS))
        with open(tmp_path / bad, "ab") as f:
            f.write(b"# caf\xe9\n")  # Latin-1
        assert declared_paths("python -m stages.report", tmp_path) is None


STAGE = '''\
"""Reads its input, and maybe one more file."""

import sys
from pathlib import Path

from safetensors.torch import load_file

from emergence.core.cli import stage_main


@stage_main
def main(argv=None):
    text = Path("data/in.txt").read_text()
    load_file("data/t.safetensors")  # opened in native code: seen through the wrapped reader
    if Path("extra.txt").exists():
        text += Path("extra.txt").read_text()
    Path("out.txt").write_text(text)
    if sys.argv[1:] == ["--fail"]:
        raise SystemExit(1)
    if sys.argv[1:2] == ["--exit"]:  # argparse's 2, or a message (Python exits 1 printing it)
        raise SystemExit(None if sys.argv[2] == "none" else int(sys.argv[2]) if sys.argv[2].isdigit() else sys.argv[2])


if __name__ == "__main__":
    raise SystemExit(main())
'''


def run_stage(root: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(root)])}
    proc = subprocess.run(
        [sys.executable, "-m", "stages.fake", *args], cwd=root, env=env, capture_output=True, text=True
    )
    record = json.loads(
        (root / "logs/stages" / f"{record_key(' '.join(['python -m stages.fake', *args]))}.json").read_text()
    )
    return proc, record


def test_a_stage_reading_an_undeclared_file_is_recorded_and_warned(tmp_path):
    """The planted case: a stage whose code reads a file its dvc.yaml entry does not name."""
    import numpy as np
    from safetensors.numpy import save_file

    (tmp_path / "stages").mkdir()
    (tmp_path / "stages/__init__.py").write_text("")
    (tmp_path / "stages/fake.py").write_text(STAGE)
    (tmp_path / "data").mkdir()
    (tmp_path / "data/in.txt").write_text("in")
    save_file({"x": np.zeros(2)}, str(tmp_path / "data/t.safetensors"))
    entry = {"cmd": "python -m stages.fake", "deps": ["stages/fake.py", "data/in.txt"], "outs": ["out.txt"]}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"fake": entry}}))
    (tmp_path / "params.yaml").write_text("{}\n")

    proc, record = run_stage(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert record["undeclared_reads"] == ["data/t.safetensors"]  # the native read, seen
    entry["deps"].append("data/t.safetensors")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"fake": entry}}))
    proc, record = run_stage(tmp_path)
    assert (record["reads"], record["undeclared_reads"], proc.stderr) == (2, [], "")

    (tmp_path / "extra.txt").write_text("more")
    proc, record = run_stage(tmp_path)
    assert record["undeclared_reads"] == ["extra.txt"]
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, warnings
    assert_names(warnings[0], "stages.fake", "extra.txt", "deps")  # the stage, the file, what it is missing from

    proc, record = run_stage(tmp_path, "--fail")  # a failed stage: recorded, but no warning besides
    assert (proc.returncode, record["undeclared_reads"], record["reads"]) == (1, None, 3)  # no such instance
    assert "warning:" not in proc.stderr


def test_a_stage_is_recorded_with_the_exit_status_its_system_exit_gives(tmp_path):
    """A SystemExit other than 0 is a failed run, whatever its code: the record says the process's exit
    status, and the stage's one error is all it says (no warning about its reads). A plain `sys.exit()`
    exits 0: a finished run, whose undeclared reads are warned of."""
    import numpy as np
    from safetensors.numpy import save_file

    (tmp_path / "stages").mkdir()
    (tmp_path / "stages/__init__.py").write_text("")
    (tmp_path / "stages/fake.py").write_text(STAGE)
    (tmp_path / "data").mkdir()
    (tmp_path / "data/in.txt").write_text("in")
    (tmp_path / "extra.txt").write_text("more")  # read, not declared
    save_file({"x": np.zeros(2)}, str(tmp_path / "data/t.safetensors"))
    deps = ["stages/fake.py", "data/in.txt", "data/t.safetensors"]
    stages = {
        f"fake{i}": {"cmd": f"python -m stages.fake --exit {how}", "deps": deps, "outs": [f"out{i}.txt"]}
        for i, how in enumerate(("2", "stopped", "none"))
    }
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    (tmp_path / "params.yaml").write_text("{}\n")
    for how, status in (("2", 2), ("stopped", 1), ("none", 0)):
        proc, record = run_stage(tmp_path, "--exit", how)
        assert (proc.returncode, record["exit"], record["undeclared_reads"]) == (status, status, ["extra.txt"])
        assert ("warning:" in proc.stderr) == (status == 0), proc.stderr
