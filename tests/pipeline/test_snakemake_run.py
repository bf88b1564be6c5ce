"""The tiny profile through Snakemake alone, in a fresh copy: every artifact equals the session's DVC run
byte for byte, and a compute edit makes Snakemake rerun exactly the jobs whose code it is.

It asks for the session's DVC run only at its end, so one worker builds this while the other builds that
(tests/conftest.py orders the files)."""

from __future__ import annotations

import pytest
from artifacts import digest, downstream, dry_run_jobs, hash_table, importers
from conftest import project_copy, run

pytestmark = pytest.mark.late_tiny_run


def test_snakemake_alone_matches_dvc(tmp_path, request):
    root = project_copy(tmp_path)
    run(["snakemake", "--cores", "1"], root)  # one core: the other worker builds the DVC run
    dvc_run = request.getfixturevalue("tiny_run")  # asked for last: built beside this run, on the other worker
    hashes = {"snakemake": digest(root, ignore_revision=True), "dvc": digest(dvc_run, ignore_revision=True)}
    table = hash_table(hashes)  # shown under `pytest -rA` (and kept beside the run)
    (tmp_path / "hashes.txt").write_text(table)
    print(f"every artifact of both runs ({tmp_path / 'hashes.txt'}):\n{table}")
    assert hashes["snakemake"] == hashes["dvc"]
    again = run(["snakemake", "--cores", "1", "-n"], root)
    assert "Nothing to be done" in again.stdout + again.stderr
    # a compute edit in the run Snakemake built (it holds each job's params): exactly the importers rerun
    rel = "src/emergence/studies/assoc/theory.py"
    (root / rel).write_text((root / rel).read_text() + "\n_EDITED = 1\n")
    dry = run(["snakemake", "--cores", "1", "--dry-run"], root)
    jobs, expected = dry_run_jobs(root, dry.stdout + dry.stderr), importers(root, rel)
    assert expected and set(jobs) == downstream(root, expected)
    fed = {name for name in expected if name in downstream(root, expected - {name})}  # rerun anyway
    assert all("Params have changed" in jobs[name] for name in expected - fed)
