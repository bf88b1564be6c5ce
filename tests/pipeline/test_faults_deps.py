"""Fault cases of the deps area: every file a stage reads is a dep, so no change to one leaves the
pipeline silently stale (the audit: new DINOv2 weights in dino_features.local_dir, `dvc status` up to
date, a forced rerun giving other features)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import yaml
from faults import assert_only_changed, assert_outcome, fault_copy, run_command, snapshot

from emergence.core.pipeline import Job, resolve_jobs


def recorded_jobs(root: Path) -> list[tuple[Job, dict | None]]:
    """Each stage instance of the run's dvc.yaml and the record of its last run (None: no record)."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    jobs = resolve_jobs(yaml.safe_load((root / "dvc.yaml").read_text()), params)
    records = [json.loads(p.read_text()) for p in (root / "logs/stages").glob("*.json")]
    by_argv = {tuple(shlex.split(r["command"])): r for r in records}
    return [(job, by_argv.get(tuple(shlex.split(job.cmd)))) for job in jobs]


def undeclared_reads(root: Path) -> dict[str, object]:
    """Per stage instance: the undeclared reads its record lists ([] when none), or why there is nothing
    to check ("no record", or "no read record": a record written before reads were recorded)."""
    return {
        job.name: "no record" if record is None else record.get("undeclared_reads", "no read record")
        for job, record in recorded_jobs(root)
    }


def is_code(dep: str) -> bool:
    return dep.startswith(("src/", "stages/"))


def test_every_stage_of_the_tiny_run_reads_only_what_it_declares(tiny_run):
    """Each stage instance recorded the files it opened under the run (core/reads.py): all lie in its
    deps (code, data, user paths), outs or meta.untracked. Needs a tiny run built by this code."""
    found = undeclared_reads(tiny_run)
    stale = {name: reads for name, reads in found.items() if reads != []}
    assert not stale, f"stages reading what they do not declare: {stale}"
    # the records saw the reads: every instance with a data dep read something under the run
    jobs = recorded_jobs(tiny_run)
    blind = [job.name for job, rec in jobs if not rec["reads"] and any(not is_code(d) for d in job.deps)]
    assert not blind, f"records that saw no read of a declared input: {blind}"
    n_images = yaml.safe_load((tiny_run / "params.yaml").read_text())["visual_scenes"]["n_images"]
    dino = next(rec for job, rec in jobs if job.name == "dino_features")
    assert dino["reads"] > n_images  # the dialogs and every image (hashed for the feature cache)


def test_a_stage_reading_a_file_not_among_its_deps_is_reported(tiny_run, tmp_path):
    """Planted: assoc_basis's entry loses its corpus dep; the stage still reads the corpus (through
    safetensors' native reader), warns and records it, and the run check above names it."""
    root = fault_copy(tiny_run, tmp_path / "run")
    dvc = yaml.safe_load((root / "dvc.yaml").read_text())
    dvc["stages"]["assoc_basis"]["deps"].remove("${paths.assoc_corpus}")
    (root / "dvc.yaml").write_text(yaml.safe_dump(dvc, sort_keys=False))
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "stages.assoc.basis")
    assert_outcome(proc, "warning", "stages.assoc.basis read data/assoc/corpus.safetensors, not among its deps")
    assert_only_changed(root, before, ("data/assoc/basis.safetensors", "data/assoc/basis_summary.parquet"))
    assert undeclared_reads(root)["assoc_basis"] == ["data/assoc/corpus.safetensors"]


def test_new_dinov2_weights_make_dino_features_stale(tiny_run, tmp_path):
    root = fault_copy(tiny_run, tmp_path / "run")
    weights = root / "weights"
    weights.mkdir()
    (weights / "config.json").write_text('{"model_type": "dinov2"}\n')
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["dino_features"]["local_dir"] = "weights"
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert_outcome(run_command(root, "dvc", "commit", "-f", "dino_features", "visual_report"), "ok")  # as built
    assert "up to date" in run_command(root, "dvc", "status", "dino_features", "visual_report").stdout

    (weights / "config.json").write_text('{"model_type": "dinov2", "hidden_size": 768}\n')  # other weights
    before = snapshot(root)
    proc = run_command(root, "dvc", "status", "dino_features", "visual_report")
    assert_outcome(proc, "ok")
    status = " ".join(proc.stdout.split())
    assert "dino_features: changed deps: modified: weights" in status, proc.stdout
    assert "visual_report: changed deps: modified: weights" in status, proc.stdout  # it declares the section
    assert_only_changed(root, before)
