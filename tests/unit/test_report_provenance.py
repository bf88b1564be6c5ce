"""What a report records about how it was made (core/report/provenance.py): the git revision of a real
temporary checkout, clean or dirty; the params of one study by name prefix, among sections whose names
share prefixes; the seeds and input hashes; the machine line from faked platform answers; and the stage
records read from a folder of records that differ (and some damaged), tabled per declared stage.

Expected values are worked out by hand on the small inputs (hashes by hashlib, the revision from the
branch's ref file), never by the code under test."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
from pathlib import Path

import pytest
import torch
from conftest import run

from emergence.core.report import html as H
from emergence.core.report import provenance as P

# ---- git_revision: a real checkout under tmp_path --------------------------------------------------------

DIRTY = " (uncommitted changes)"


def git(repo: Path, *args: str) -> None:
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false", *args], repo)


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    """A one-commit git repo as the working directory: tracked code, .gitignore files (top and nested),
    a dvc.lock (top and nested) and a file whose name only starts like one."""
    repo = tmp_path / "repo"
    files = ("code.py", ".gitignore", "sub/.gitignore", "dvc.lock", "sub/dvc.lock", "dvc.lock.bak", "x.gitignore.txt")
    for rel in files:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(f"{rel}\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A", "--force")  # every file tracked: .gitignore's own line ignores .gitignore files
    git(repo, "commit", "-qm", "first")
    assert sorted(run(["git", "ls-files"], repo).stdout.split()) == sorted(files)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.chdir(repo)
    return repo


def head_of(repo: Path) -> str:
    """The commit the branch points at, read from its ref file (not through `git rev-parse`)."""
    ref = (repo / ".git" / "HEAD").read_text().split("ref: ")[1].strip()
    sha = (repo / ".git" / ref).read_text().strip()
    assert len(sha) == 40
    return sha


def test_git_revision_of_a_clean_checkout_is_its_head_commit(checkout):
    assert P.git_revision() == head_of(checkout)


def test_git_revision_of_a_later_commit_is_that_commit(checkout):
    first = head_of(checkout)
    (checkout / "code.py").write_text("changed\n")
    git(checkout, "commit", "-qam", "second")
    assert head_of(checkout) != first and P.git_revision() == head_of(checkout)


@pytest.mark.parametrize("edited", ["code.py", "dvc.lock.bak", "x.gitignore.txt"])
def test_git_revision_says_a_tracked_file_was_edited(edited, checkout):
    (checkout / edited).write_text("edited\n")
    assert P.git_revision() == head_of(checkout) + DIRTY


def test_git_revision_says_a_tracked_file_was_deleted(checkout):
    (checkout / "code.py").unlink()
    assert P.git_revision() == head_of(checkout) + DIRTY


@pytest.mark.parametrize(
    "edited", [[".gitignore"], ["sub/.gitignore"], ["dvc.lock"], ["sub/dvc.lock"], [".gitignore", "dvc.lock"]]
)
def test_git_revision_ignores_what_dvc_edits_while_it_runs(edited, checkout):
    for rel in edited:
        (checkout / rel).write_text("dvc wrote this\n")
    assert P.git_revision() == head_of(checkout)


def test_git_revision_ignores_untracked_files(checkout):
    (checkout / "new.py").write_text("not committed\n")
    assert P.git_revision() == head_of(checkout)


def test_git_revision_reports_a_staged_edit_beside_dvc_files(checkout):
    (checkout / "dvc.lock").write_text("dvc wrote this\n")
    (checkout / "code.py").write_text("staged\n")
    git(checkout, "add", "code.py")
    assert P.git_revision() == head_of(checkout) + DIRTY


def test_git_revision_outside_a_checkout_says_so(tmp_path, monkeypatch):
    (tmp_path / "plain").mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.chdir(tmp_path / "plain")
    assert P.git_revision() == "unknown (not a git checkout)"


def test_git_revision_without_git_installed_says_so(checkout, monkeypatch, tmp_path):
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert P.git_revision() == "unknown (not a git checkout)"


# ---- study_params and provenance ---------------------------------------------------------------------------

PARAMS = {
    "base": {"seeds": [0, 1]},
    "binding_train": {"steps": 5},
    "assoc_runs": {"layers": [1]},
    "basement": {"x": 1},  # starts with "base" too: a prefix match takes it
    "binding": {"n": 2},
    "report": {"n_examples": 8},
    "grounding_binding": {"y": 3},  # holds "binding" but does not start with it
    "paths": {
        "binding_runs": "data/binding/runs",
        "assoc_runs": "data/assoc/runs",
        "reports_dir": "reports",
        "bindingx": "data/x",
        "grounding_binding": "data/g",
    },
}


def test_study_params_keep_the_sections_and_paths_whose_names_start_with_a_prefix():
    got = P.study_params(PARAMS, ("binding", "base"))
    assert got == {
        "base": {"seeds": [0, 1]},
        "binding_train": {"steps": 5},
        "basement": {"x": 1},
        "binding": {"n": 2},
        "paths": {"binding_runs": "data/binding/runs", "bindingx": "data/x"},
    }
    assert list(got) == ["base", "binding_train", "basement", "binding", "paths"]  # params' order, paths last
    assert got["binding"] is PARAMS["binding"]  # the params' own values, not copies


def test_study_params_of_one_prefix_leave_every_other_study_out():
    assert P.study_params(PARAMS, ("assoc",)) == {
        "assoc_runs": {"layers": [1]},
        "paths": {"assoc_runs": "data/assoc/runs"},
    }
    assert P.study_params(PARAMS, ("report",)) == {"report": {"n_examples": 8}, "paths": {"reports_dir": "reports"}}
    assert P.study_params(PARAMS, ("visual",)) == {"paths": {}}


def test_study_params_paths_are_the_prefixed_ones_even_when_a_prefix_matches_paths_itself():
    got = P.study_params(PARAMS, ("pa", "assoc"))
    assert got == {"assoc_runs": {"layers": [1]}, "paths": {"assoc_runs": "data/assoc/runs"}}


def test_study_params_without_a_paths_section_record_no_paths():
    assert P.study_params({"binding": {"n": 2}, "base": {}}, ("binding",)) == {"binding": {"n": 2}, "paths": {}}


def test_provenance_records_the_studys_params_revision_seeds_and_each_inputs_hash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(P, "git_revision", lambda: "rev-1234")
    Path("data/binding").mkdir(parents=True)
    contents = {"data/binding/a.parquet": b"first", "data/binding/ab.parquet": b"second", "data/c": b""}
    for name, data in contents.items():
        Path(name).write_bytes(data)
    inputs = [Path("data/binding/ab.parquet"), Path("data/c"), Path("data/binding/a.parquet")]
    got = P.provenance(PARAMS, [3, 0], inputs, ("binding", "report"))
    assert got == {
        "params": {
            "binding_train": {"steps": 5},
            "binding": {"n": 2},
            "report": {"n_examples": 8},
            "paths": {"binding_runs": "data/binding/runs", "reports_dir": "reports", "bindingx": "data/x"},
        },
        "git_revision": "rev-1234",
        "seeds": [3, 0],
        "data_hashes": {
            "data/binding/ab.parquet": hashlib.sha256(b"second").hexdigest(),
            "data/c": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",  # sha256 of nothing
            "data/binding/a.parquet": hashlib.sha256(b"first").hexdigest(),
        },
    }
    assert list(got["data_hashes"]) == ["data/binding/ab.parquet", "data/c", "data/binding/a.parquet"]


def test_the_pages_provenance_block_shows_every_seed_in_the_recorded_order_and_each_inputs_hash():
    record = {
        "params": {"binding": {"n": 2}},
        "git_revision": "rev-1234",
        "seeds": [3, 0, 7],
        "data_hashes": {"data/b.parquet": "b" * 64, "data/a.parquet": "a" * 64},
    }
    text = re.sub(r"<[^>]+>", " ", H.provenance_block(record))
    assert re.search(r"Seeds: 3, 0, 7\s", text)
    assert re.search(r"data/a\.parquet\s+a{64}", text) and re.search(r"data/b\.parquet\s+b{64}", text)


def test_provenance_reads_the_revision_of_the_working_directory(checkout):
    (checkout / "code.py").write_text("edited\n")
    got = P.provenance({"base": {}}, [1], [Path("code.py")], ("base",))
    assert got["git_revision"] == head_of(checkout) + DIRTY
    assert got["data_hashes"] == {"code.py": hashlib.sha256(b"edited\n").hexdigest()}


# ---- machine -----------------------------------------------------------------------------------------------------


@pytest.fixture
def platform_answers(monkeypatch) -> None:
    """A made-up machine: every value machine() reports differs from every other."""
    monkeypatch.setattr(socket, "gethostname", lambda: "node-7")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "release", lambda: "6.8.0")
    monkeypatch.setattr(platform, "python_version", lambda: "3.12.9")
    monkeypatch.setattr(torch, "__version__", "9.9.9+test")


def test_machine_names_host_architecture_cores_memory_os_python_and_torch(platform_answers, monkeypatch):
    sysconf = {"SC_PAGE_SIZE": 16384, "SC_PHYS_PAGES": 11 * 2**14}  # 2**14 pages of 16 KiB: 1/4 GiB
    monkeypatch.setattr(os, "sysconf", lambda name: sysconf[name])
    assert P.machine() == "node-7: aarch64, 6 cores, 3 GiB, Linux 6.8.0, Python 3.12.9, torch 9.9.9+test"  # 2.75
    sysconf["SC_PHYS_PAGES"] = 9 * 2**14  # 2.25 GiB
    assert P.machine() == "node-7: aarch64, 6 cores, 2 GiB, Linux 6.8.0, Python 3.12.9, torch 9.9.9+test"
    sysconf.update(SC_PAGE_SIZE=4096, SC_PHYS_PAGES=48 * 2**18)  # 48 GiB of 4 KiB pages
    assert P.machine() == "node-7: aarch64, 6 cores, 48 GiB, Linux 6.8.0, Python 3.12.9, torch 9.9.9+test"


@pytest.mark.parametrize("error", [ValueError, OSError])
def test_machine_without_a_memory_size_says_memory_unknown(error, platform_answers, monkeypatch):
    def sysconf(name):
        raise error(name)

    monkeypatch.setattr(os, "sysconf", sysconf)
    assert P.machine() == "node-7: aarch64, 6 cores, memory unknown, Linux 6.8.0, Python 3.12.9, torch 9.9.9+test"


def test_machine_on_a_system_without_sysconf_says_memory_unknown(platform_answers, monkeypatch):
    monkeypatch.delattr(os, "sysconf")
    assert P.machine() == "node-7: aarch64, 6 cores, memory unknown, Linux 6.8.0, Python 3.12.9, torch 9.9.9+test"


# ---- stage_records -----------------------------------------------------------------------------------------------

FULL = {
    "command": "python -m stages.binding.train --seed 1",
    "engine": "dvc",
    "host": "h1",
    "started": "2026-01-02T00:00:00Z",
}


def full(stage, command, **more) -> dict:
    """A record with every key the table reads; `more` adds or overrides keys (a stage's notes among them)."""
    return {**FULL, "stage": stage, "command": command, "wall_s": 1.5, "max_rss_mb": 200.0, "exit": 0, **more}


def write_records(folder: Path, records: dict[str, object]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, record in records.items():
        (folder / name).write_text(record if isinstance(record, str) else json.dumps(record))


ORDERS = {
    "by stage then command, not by file name": (
        {  # file names in the reverse of the records' order
            "a.json": full("binding_train@1", "python -m stages.binding.train --seed 1"),
            "b.json": full("binding_train@0", "python -m stages.binding.train --seed 0"),
            "c.json": full("binding_aid_train@plain-1", "python -m stages.binding.aid_train"),
            "d.json": full(None, "python -m stages.binding.report", engine="direct"),
            "e.json": full(None, "python -m stages.assoc.report", engine="direct"),
        },
        [
            (None, "python -m stages.assoc.report"),
            (None, "python -m stages.binding.report"),
            ("binding_aid_train@plain-1", "python -m stages.binding.aid_train"),
            ("binding_train@0", "python -m stages.binding.train --seed 0"),
            ("binding_train@1", "python -m stages.binding.train --seed 1"),
        ],
    ),
    "without a stage or command first, whatever the others are named": (
        {
            "a.json": full("Report", "/usr/bin/python3 -m stages.report"),  # capitals and "/" sort early
            "b.json": full(None, "/usr/bin/python3 -m stages.train", engine="direct"),
            "c.json": full("0_prepare", "cmd"),
            "d.json": {"stage": "Report", "wall_s": 3.0},  # no command
            "e.json": full(None, "Rscript plot.R", engine="direct"),
        },
        [
            (None, "/usr/bin/python3 -m stages.train"),
            (None, "Rscript plot.R"),
            ("0_prepare", "cmd"),
            ("Report", None),
            ("Report", "/usr/bin/python3 -m stages.report"),
        ],
    ),
}


@pytest.mark.parametrize("records, order", ORDERS.values(), ids=ORDERS)
def test_stage_records_sort(tmp_path, records, order):
    folder = tmp_path / "stages"
    write_records(folder, records)
    assert [(r["stage"], r["command"]) for r in P.stage_records(folder)] == order


def test_stage_records_are_read_as_utf_8_whatever_the_locale(tmp_path, ascii_locale):
    folder = tmp_path / "stages"
    folder.mkdir()
    record = full("report", "python -m stages.report --title caf\u00e9", host="h\u00f6st")
    (folder / "r.json").write_bytes(json.dumps(record, ensure_ascii=False).encode("utf-8"))
    (got,) = P.stage_records(folder)
    assert (got["command"], got["host"]) == ("python -m stages.report --title caf\u00e9", "h\u00f6st")


def test_stage_records_keep_the_table_keys_only_and_fill_missing_ones_with_none(tmp_path):
    folder = tmp_path / "stages"
    write_records(
        folder,
        {
            "whole.json": full("train@0", "cmd0", device="cuda", undeclared_reads=["x"], wall_s=12.25, exit=3),
            "partial.json": {"stage": "train@1", "wall_s": 7},
        },
    )
    assert P.stage_records(folder) == [
        {
            "stage": "train@0",
            "command": "cmd0",
            "engine": "dvc",
            "host": "h1",
            "started": "2026-01-02T00:00:00Z",
            "wall_s": 12.25,
            "max_rss_mb": 200.0,
            "exit": 3,
        },
        {
            "stage": "train@1",
            "command": None,
            "engine": None,
            "host": None,
            "started": None,
            "wall_s": 7,
            "max_rss_mb": None,
            "exit": None,
        },
    ]
    assert list(P.stage_records(folder)[0]) == list(P.RECORD_KEYS)


def test_stage_records_put_a_note_in_place_of_each_damaged_record(tmp_path):
    folder = tmp_path / "stages"
    write_records(
        folder,
        {
            "torn.json": '{"stage": "tra',  # a writer killed mid-file
            "list.json": [1, 2],  # JSON, but no object
            "null.json": "null",
            "ok.json": full("report", "python -m stages.binding.report"),
        },
    )
    (folder / "latin1.json").write_bytes(b'{"stage": "r\xe9port"}')  # not UTF-8
    (folder / "dir.json").mkdir()  # a folder: reading it fails
    got = P.stage_records(folder)
    notes = [
        f"{name}: unreadable record" for name in ("dir.json", "latin1.json", "list.json", "null.json", "torn.json")
    ]
    assert [r["command"] for r in got] == [*notes, "python -m stages.binding.report"]
    assert all(r == {**dict.fromkeys(P.RECORD_KEYS), "command": r["command"]} for r in got[:5])


def test_stage_records_read_only_json_files_directly_in_the_folder(tmp_path):
    folder = tmp_path / "stages"
    write_records(folder, {"kept.json": full("a", "cmd-a"), "notes.txt": full("b", "cmd-b"), "kept.json.tmp": "{"})
    write_records(folder / "old", {"nested.json": full("c", "cmd-c")})
    assert [r["command"] for r in P.stage_records(folder)] == ["cmd-a"]


def test_stage_records_of_no_folder_are_none(tmp_path):
    assert P.stage_records(tmp_path / "absent") == []
    (tmp_path / "file.json").write_text(json.dumps(full("a", "cmd")))
    assert P.stage_records(tmp_path / "file.json") == []  # a file, not a folder
    (tmp_path / "empty").mkdir()
    assert P.stage_records(tmp_path / "empty") == []


def test_stage_records_read_logs_stages_of_the_working_directory_by_default(tmp_path, monkeypatch):
    write_records(tmp_path / "logs" / "stages", {"x.json": full("b", "cmd-b"), "y.json": full("a", "cmd-a")})
    write_records(tmp_path / "logs", {"z.json": full("c", "cmd-c")})  # logs/, not logs/stages/
    monkeypatch.chdir(tmp_path)
    assert [r["command"] for r in P.stage_records()] == ["cmd-a", "cmd-b"]


# ---- stage_times ------------------------------------------------------------------------------------------------


def rec(stage, engine="dvc", wall=None, rss=None, exit=0, command="cmd") -> dict:
    return {"stage": stage, "command": command, "engine": engine, "host": "h", "started": "t", "wall_s": wall,
            "max_rss_mb": rss, "exit": exit}  # fmt: skip


def times_row(stage, instances, engine, wall_sum, wall_longest, rss, failed) -> dict:
    """A stage_times row: instances recorded, engines, wall s (sum), wall s (longest), max RSS MB, failed."""
    return {"stage": stage, "instances recorded": instances, "engine": engine, "wall s (sum)": wall_sum,
            "wall s (longest)": wall_longest, "max RSS MB": rss, "failed": failed}  # fmt: skip


UNRECORDED = "not recorded"
RECORDS = [
    rec("train@0", "snakemake", wall=1.26, rss=300.0, exit=0),
    rec("train@1", "dvc", wall=4, rss=512.44, exit=1),
    rec("train@2", "dvc", wall=2.33, rss=600, exit=None),  # a record with no exit: not counted failed
    rec("train", "dvc", wall=True, rss=False, exit=-9),  # bools are no numbers; killed: failed
    rec("train_aid@plain-1", "direct", wall=50.0, rss=900.0, exit=2),  # another stage sharing the prefix
    rec("report", "dvc", wall="12", rss=None, exit=0),  # a wall time that is no number
    rec(None, "direct", wall=99.0, rss=999.0, exit=1, command="python -m stages.train"),  # a direct run
]


def test_stage_times_total_longest_peak_and_failures_per_declared_stage():
    train = P.stage_times(RECORDS, ["train"])
    # train@0, @1, @2 and plain "train": walls 1.26 + 4 + 2.33 = 7.59 (sum), 4 (longest); RSS 600 (an int)
    assert train == [times_row("train", 4, "dvc, snakemake", 7.6, 4.0, 600, 2)]


def test_stage_times_take_a_stage_by_its_name_before_the_at_sign_only():
    (aid,) = P.stage_times(RECORDS, ["train_aid"])
    assert aid == times_row("train_aid", 1, "direct", 50.0, 50.0, 900.0, 1)
    assert P.stage_times(RECORDS, ["tra"])[0]["instances recorded"] == "not recorded"
    assert P.stage_times(RECORDS, ["plain-1"])[0]["instances recorded"] == "not recorded"


def test_stage_times_rows_follow_the_declared_order_and_mark_stages_never_recorded():
    rows = P.stage_times(RECORDS, ["report", "absent", "train"])
    assert [r["stage"] for r in rows] == ["report", "absent", "train"]
    report, absent, _ = rows
    assert report == times_row("report", 1, "dvc", UNRECORDED, UNRECORDED, UNRECORDED, 0)
    assert absent == times_row("absent", UNRECORDED, UNRECORDED, UNRECORDED, UNRECORDED, UNRECORDED, 0)


@pytest.mark.parametrize("name", ["None", "null", "XXXX", "direct"])
def test_stage_times_count_no_direct_run_under_a_declared_stage_whatever_its_name(name):
    (row,) = P.stage_times(RECORDS, [name])  # RECORDS' direct run: stage null, engine "direct"
    assert row["instances recorded"] == "not recorded" and row["failed"] == 0


def test_stage_times_round_the_longest_and_total_wall_time_to_a_tenth_of_a_second():
    records = [rec("fit@0", wall=2.26, rss=100.04), rec("fit@1", wall=7.34, rss=99.0), rec("fit@2", wall=0.07)]
    (row,) = P.stage_times(records, ["fit"])
    assert (row["wall s (sum)"], row["wall s (longest)"], row["max RSS MB"]) == (9.7, 7.3, 100.0)
    assert isinstance(row["wall s (longest)"], float)


def test_stage_times_of_records_read_from_files(tmp_path):
    write_records(
        tmp_path,
        {
            "t1.json": full("binding_train@1", "c1", wall_s=30.04, max_rss_mb=700.0, exit=0),
            "t0.json": full("binding_train@0", "c0", wall_s=10.0, max_rss_mb=750.44, exit=1, engine="snakemake"),
            "bad.json": "{",
        },
    )
    (row,) = P.stage_times(P.stage_records(tmp_path), ["binding_train"])
    assert (row["instances recorded"], row["engine"], row["failed"]) == (2, "dvc, snakemake", 1)
    assert (row["wall s (sum)"], row["wall s (longest)"], row["max RSS MB"]) == (40.0, 30.0, 750.4)
