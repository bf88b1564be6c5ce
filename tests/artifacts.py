"""What a tiny-profile run must produce, how runs are compared, and which jobs an edit reruns (shared by the
pipeline tests)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml

from emergence.core.code_digest import instance_files
from emergence.core.declared import GUARD
from emergence.core.pipeline import read_declaration, resolve_jobs

ARTIFACTS = [
    "data/binding/programs.parquet",
    "data/binding/trajectory/seed0.parquet",
    "data/binding/trajectory/seed1.parquet",
    "data/binding/phases/seed1.parquet",
    "data/binding/predictions/seed0.parquet",
    "data/binding/patching/seed0.parquet",
    "data/binding/ablation/seed1.parquet",
    "data/binding/stress/seed0.parquet",
    "data/binding/stress/seed1.parquet",
    "data/binding/aids/plain-seed1.parquet",
    "data/binding/aids/no_line_values-seed1.parquet",
    "reports/metrics/binding.json",
    "reports/metrics/binding_heuristics.json",
    "reports/plots/binding_trajectory.csv",
    "reports/binding.html",
    "data/assoc/corpus.safetensors",
    "data/assoc/basis.safetensors",
    "data/assoc/cosines/L1_seed0.parquet",
    "data/assoc/cosines/L2_seed0.parquet",
    "data/assoc/causal/L2_seed0.parquet",
    "data/assoc/order.parquet",
    "data/assoc/words.parquet",
    "reports/metrics/assoc_corpus.json",
    "reports/metrics/associations.json",
    "reports/plots/assoc_cosines.csv",
    "reports/associations.html",
    "data/grounding/turns.parquet",
    "data/grounding/vocab.json",
    "data/grounding/eval.parquet",
    "data/grounding/gain/transformer4_seed0.parquet",
    "data/grounding/gain/mamba4_seed0.parquet",
    "data/grounding/gain/lstm4_seed0.parquet",
    "data/grounding/templates.parquet",
    "data/grounding/template_gain/transformer4_seed0.parquet",
    "data/grounding/template_gain/lstm4_seed0.parquet",
    "data/grounding/lens/lstm4_seed0.parquet",
    "data/grounding/cooc.parquet",
    "data/grounding/saliency/transformer4_seed0.parquet",
    "data/grounding/heads/transformer4_seed0.parquet",
    "data/grounding/ablation/transformer4_seed0.parquet",
    "reports/metrics/childes_counts.json",
    "reports/metrics/grounding.json",
    "reports/plots/grounding_gain.csv",
    "reports/grounding.html",
    "data/visual/dialogs.parquet",
    "data/visual/features/features.safetensors",
    "data/visual/gain/caption_transformer4_seed0.parquet",
    "data/visual/gain/image_transformer4_seed0.parquet",
    "data/visual/saliency/caption_transformer4_seed0.parquet",
    "data/visual/saliency/image_transformer4_seed0.parquet",
    "data/visual/heads/caption_transformer4_seed0.parquet",
    "data/visual/heads/image_transformer4_seed0.parquet",
    "data/visual/ablation/caption_transformer4_seed0.parquet",
    "data/visual/ablation/image_transformer4_seed0.parquet",
    "reports/metrics/visdial_counts.json",
    "reports/metrics/grounding_visual.json",
    "reports/grounding_visual.html",
    "reports/index.html",
]


def ran_stages(output: str) -> list[str]:
    return [line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")]


def set_param(root: Path, section: str, key: str, value) -> None:
    path = root / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params[section][key] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))


# Between these two comments an HTML report holds what differs between two runs of the same inputs
# (machine, engine, wall times: emergence.core.report.html.RUN_SPECIFIC).
RUN_SPECIFIC = re.compile(rb"<!-- run-specific -->.*?<!-- /run-specific -->", re.S)


def comparable(data: bytes, suffix: str, ignore_revision: bool) -> bytes:
    """A file's bytes as runs are compared: with `ignore_revision`, an HTML report's git revision line
    and run-specific blocks are blanked."""
    if not (ignore_revision and suffix == ".html"):
        return data
    return RUN_SPECIFIC.sub(b"", re.sub(rb"Git revision: [^<]*", b"", data))


def digest(root: Path, ignore_revision: bool = False, reports: bool = True) -> dict[str, str]:
    """sha256 of every artifact (not the per-image feature cache: a pulled clone has none);
    `ignore_revision` blanks the reports' git revision line, which records whether params.yaml was
    edited before or after each report was built, and their run-specific blocks (machine, engine,
    wall times); without `reports`, data/ alone (a run of some targets builds no pages)."""
    files = [
        p
        for p in sorted((root / "data").rglob("*"))  # scratch and cache are not artifacts
        if p.is_file()
        and not {"scratch", "cache"} & set(p.parts)
        and p.name not in (".gitignore", ".snakemake_timestamp")
    ]
    files += [root / a for a in ARTIFACTS if a.startswith("reports/") and reports]
    return {
        str(p.relative_to(root)): hashlib.sha256(comparable(p.read_bytes(), p.suffix, ignore_revision)).hexdigest()
        for p in files
    }


def hash_table(runs: dict[str, dict[str, str]]) -> str:
    """Every artifact of any run, one row each: path, sha256[:12] in each run (- when absent), equal?"""
    paths = sorted(set().union(*runs.values()))
    rows = [["path", *runs, "equal"]]
    for path in paths:
        hashes = [run.get(path, "-")[:12] for run in runs.values()]
        rows.append([path, *hashes, "yes" if len(set(hashes)) == 1 and "-" not in hashes else "NO"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows) + "\n"


def jobs_of(root: Path) -> list:
    params = yaml.safe_load((root / "params.yaml").read_text())
    return resolve_jobs(yaml.safe_load((root / "dvc.yaml").read_text()), params)


def importers(root: Path, rel: str) -> set[str]:
    """DVC stage instances whose code digest (core/code_digest.py) holds file `rel`."""
    files = instance_files(read_declaration(root), yaml.safe_load((root / "params.yaml").read_text()), root)
    return {instance for instance, code in files.items() if Path(rel) in code and instance != GUARD}


def downstream(root: Path, names: set[str]) -> set[str]:
    """`names` and every job that reads, directly or not, what one of them writes; the params check's
    stamp excepted (its bytes never change: every job reads it, none reruns for it)."""
    jobs, found = jobs_of(root), set(names)
    while True:
        outs = {out for job in jobs if job.name in found - {GUARD} for out in job.outs}
        more = {job.name for job in jobs if set(job.inputs) & outs} - found
        if not more:
            return found
        found |= more


def dry_run_jobs(root: Path, dry_run: str) -> dict[str, str]:
    """DVC instance name -> reason line, for every job a Snakemake dry run would run (matched by output)."""
    instance_of = {out: job.name for job in jobs_of(root) for out in job.outs}
    jobs = {}
    for block in dry_run.split("\nrule ")[1:]:
        output = re.search(r"^\s+output: (.*)$", block, re.M)
        if output:  # `rule all` has none
            reason = re.search(r"^\s+reason: (.*)$", block, re.M)
            jobs[instance_of[output.group(1).split(", ")[0]]] = reason.group(1) if reason else ""
    return jobs
