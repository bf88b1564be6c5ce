"""Render reports/binding.html, the DVC metrics JSON and the plots CSV from the analyses."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, load_base, path_of, section
from emergence.core.io import atomic_path, read_parquet, write_json, write_text
from emergence.core.report.provenance import provenance
from emergence.studies.binding.ablation import rank_routing_heads
from emergence.studies.binding.program_io import load_programs, subset
from emergence.studies.binding.report import ReportParams, binding_metrics, binding_page, binding_plot_table
from emergence.studies.binding.report_mechanisms import mechanism_metrics
from emergence.studies.binding.sets import heuristic_table

PER_SEED = (
    "binding_trajectory",
    "binding_phases",
    "binding_predictions",
    "binding_patching",
    "binding_ablation",
    "binding_stress",
)


def per_seed_files(params: dict, seeds: list[int]) -> dict[str, list[Path]]:
    return {key: [path_of(params, key) / f"seed{s}.parquet" for s in seeds] for key in PER_SEED}


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    seeds = load_base(params).seeds
    n_examples = from_dict(ReportParams, section(params, "report"), "report").n_examples
    programs_path = path_of(params, "binding_programs")
    programs = load_programs(programs_path)
    files = per_seed_files(params, seeds)
    tables = {
        key: pd.concat([read_parquet(p, {"seed": "i"}) for p in paths], ignore_index=True)
        for key, paths in files.items()
    }
    heuristics = heuristic_table(subset(programs, "train"))
    routing = rank_routing_heads(tables["binding_ablation"])
    record = provenance(params, seeds, [programs_path, *sum(files.values(), [])], ("base", "binding", "report"))
    html = binding_page(
        programs,
        heuristics,
        tables["binding_trajectory"],
        tables["binding_phases"],
        tables["binding_predictions"],
        tables["binding_patching"],
        tables["binding_ablation"],
        routing,
        tables["binding_stress"],
        record,
        n_examples=n_examples,
    )
    metrics = binding_metrics(
        tables["binding_trajectory"],
        tables["binding_predictions"],
        heuristics,
        tables["binding_phases"],
        tables["binding_stress"],
    ) | {"mechanisms": mechanism_metrics(tables["binding_patching"], tables["binding_ablation"])}
    with atomic_path(path_of(params, "binding_plots")) as tmp:
        binding_plot_table(tables["binding_trajectory"]).to_csv(tmp, index=False)
    write_json(metrics, path_of(params, "binding_metrics"))
    write_text(html, path_of(params, "binding_report"))


if __name__ == "__main__":
    raise SystemExit(main())
