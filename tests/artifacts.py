"""What a tiny-profile run must produce, and how runs are compared (shared by the pipeline tests)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml

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


def digest(root: Path, ignore_revision: bool = False) -> dict[str, str]:
    """sha256 of every artifact (not the per-image feature cache: a pulled clone has none);
    `ignore_revision` blanks the reports' git revision line, which records whether params.yaml was
    edited before or after each report was built, and their run-specific blocks (machine, engine,
    wall times)."""
    files = [
        p
        for p in sorted((root / "data").rglob("*"))  # scratch and cache are not artifacts
        if p.is_file()
        and not {"scratch", "cache"} & set(p.parts)
        and p.name not in (".gitignore", ".snakemake_timestamp")
    ]
    files += [root / a for a in ARTIFACTS if a.startswith("reports/")]
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
