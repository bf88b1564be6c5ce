"""Write reports/index.html (per study its claims and headline figures, the benchmarks, provenance) and
the headline metrics: each claim's number, the one metrics file DVC shows in `dvc exp show`."""

from __future__ import annotations

import json
import os

from emergence.claims import ASSOC, BINDING, CLAIMS, FIGURES, GROUNDING, VISUAL
from emergence.core.cli import project_root, stage_main, start_stage
from emergence.core.config import load_base, path_of
from emergence.core.io import PipelineError, file_sha256, write_json, write_text
from emergence.core.pipeline import read_declaration
from emergence.core.report.bench import bench_section, read_bench
from emergence.core.report.claims import headlines
from emergence.core.report.index import Study, index_page, missing_sections
from emergence.core.report.provenance import git_revision, machine, stage_records, stage_times

# (study key, paths key of its page, paths key of its metrics, title, one-line summary), in display order.
STUDIES = [
    (
        BINDING,
        "binding_report",
        "binding_metrics",
        "Variable binding",
        "How a GPT-2-style model learns to follow chains of assignments (Wu, Geiger & Millière 2025).",
    ),
    (
        ASSOC,
        "assoc_report",
        "assoc_metrics",
        "Token associations",
        "Early weights of an attention-only model equal closed forms of corpus statistics (Im et al. 2026).",
    ),
    (
        GROUNDING,
        "grounding_report",
        "grounding_metrics",
        "Symbol grounding (child-directed speech)",
        "Does seeing an object make its word less surprising? Transformer, Mamba-2 and LSTM (Wu et al. 2025).",
    ),
    (
        VISUAL,
        "visual_report",
        "visual_metrics",
        "Symbol grounding (visual dialogue)",
        "The same question with a caption or the image itself (DINOv2 features) as the environment.",
    ),
]


def read_metrics(path) -> dict | None:
    if not path.exists():
        return None
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise PipelineError(f"{path}: not readable JSON ({e})") from e
    if not isinstance(metrics, dict):
        raise PipelineError(f"{path}: expected a JSON object, got {type(metrics).__name__}")
    return metrics


def study_of(params: dict, key: str, page_key: str, metrics_key: str, title: str, summary: str) -> Study:
    """The study as the index shows it; its page must hold an anchor for every section a link names."""
    index, page = path_of(params, "index_report"), path_of(params, page_key)
    if page.exists():
        sections = [c.section for c in CLAIMS if c.study == key] + [f.section for f in FIGURES if f.study == key]
        if missing := missing_sections(page.read_text(encoding="utf-8"), sections):
            raise PipelineError(
                f"src/emergence/claims.py: {key}: no section {', '.join(map(repr, missing))} on {page} "
                "(a claim's or figure's section must be a heading of its study page)"
            )
    href = os.path.relpath(page, index.parent) if page.exists() else None
    return Study(key, title, summary, href, read_metrics(path_of(params, metrics_key)))


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv)
    studies = [study_of(params, *entry) for entry in STUDIES]
    bench_path = path_of(params, "bench_report")
    inputs = [path_of(params, metrics_key) for _, _, metrics_key, _, _ in STUDIES] + [bench_path]
    records = stage_records()
    record = {
        "git_revision": git_revision(),
        "params_file": args.params,
        "params_hash": file_sha256(args.params),
        "seeds": load_base(params).seeds,
        "data_hashes": {str(p): file_sha256(p) for p in inputs if p.exists()},
        "machine": machine(),
        "records": records,
        "stage_times": stage_times(records, list(read_declaration(project_root())["stages"])),
    }
    html = index_page(
        studies,
        CLAIMS,
        FIGURES,
        {key: str(path_of(params, metrics_key)) for key, _, metrics_key, _, _ in STUDIES},
        bench_section(read_bench(bench_path), str(bench_path)),
        record,
    )
    write_text(html, path_of(params, "index_report"))
    write_json(headlines(CLAIMS, {s.key: s.metrics for s in studies}), path_of(params, "headline_metrics"))


if __name__ == "__main__":
    raise SystemExit(main())
