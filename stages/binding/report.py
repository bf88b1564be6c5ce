"""Render reports/binding.html, the DVC metrics JSON and the plots CSV from the analyses."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, load_base, path_of, section
from emergence.core.io import PipelineError, atomic_path, read_parquet, read_parquets, write_json, write_text
from emergence.core.report.interactive import bundle_src
from emergence.core.report.provenance import provenance
from emergence.interp.llc_params import LLCSeeds
from emergence.studies.binding.ablation import rank_routing_heads
from emergence.studies.binding.aid_table import COLUMNS, DEFAULT, aid_rows, aids_metrics
from emergence.studies.binding.aids import AidParams
from emergence.studies.binding.program_io import load_programs, subset
from emergence.studies.binding.report import binding_metrics, binding_page, binding_plot_table
from emergence.studies.binding.report_llc import llc_metrics
from emergence.studies.binding.report_mechanisms import mechanism_metrics
from emergence.studies.binding.report_params import ReportParams
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
    """Each per-seed analysis of the runs `seeds`; the LLC of the seeds binding_llc names (opt-in)."""
    llc_seeds = from_dict(LLCSeeds, section(params, "binding_llc"), "binding_llc").seeds
    of = {key: seeds for key in PER_SEED} | {"binding_llc": llc_seeds}
    return {key: [path_of(params, key) / f"seed{s}.parquet" for s in of[key]] for key in of}


def aid_files(params: dict) -> list[Path]:
    p = from_dict(AidParams, section(params, "binding_aids"), "binding_aids")
    return [path_of(params, "binding_aids") / f"{aid}-seed{s}.parquet" for aid in p.aids for s in p.seeds]


def side_by_side(params: dict, tables: dict[str, pd.DataFrame], files: list[Path]) -> pd.DataFrame:
    """The aid variants' rows, and the default's rows of the same seeds; none without a variant (opt-in)."""
    aid_params = from_dict(AidParams, section(params, "binding_aids"), "binding_aids")
    if not aid_params.aids:
        return pd.DataFrame(columns=list(COLUMNS))
    seeds = aid_params.seeds
    of = {key: {s: t for s, t in tables[key].groupby("seed")} for key in PER_SEED[:2] + ("binding_patching",)}
    if missing := [s for s in seeds if any(s not in by_seed for by_seed in of.values())]:
        raise PipelineError(f"binding_aids.seeds: no default run of seed {missing} to compare with (base.seeds)")
    default = [
        aid_rows(DEFAULT, s, of["binding_trajectory"][s], of["binding_phases"][s], of["binding_patching"][s])
        for s in seeds
    ]
    return pd.concat([*default, *(read_parquet(f, {"seed": "i"}) for f in files)], ignore_index=True)


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    seeds = load_base(params).seeds
    n_examples = from_dict(ReportParams, section(params, "report"), "report").n_examples
    programs_path = path_of(params, "binding_programs")
    programs = load_programs(programs_path)
    files = per_seed_files(params, seeds)
    tables = {key: read_parquets(paths, {"seed": "i"}) for key, paths in files.items()}
    heuristics = heuristic_table(subset(programs, "train"))
    routing = rank_routing_heads(tables["binding_ablation"])
    aids = side_by_side(params, tables, aid_paths := aid_files(params))
    record = provenance(
        params, seeds, [programs_path, *sum(files.values(), []), *aid_paths], ("base", "binding", "report")
    )
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
        aids,
        tables["binding_llc"],
        record,
        n_examples=n_examples,
        plotly_src=bundle_src(path_of(params, "binding_report"), path_of(params, "plotly_js")),
    )
    metrics = binding_metrics(
        tables["binding_trajectory"],
        tables["binding_predictions"],
        heuristics,
        tables["binding_phases"],
        tables["binding_stress"],
    ) | {
        "mechanisms": mechanism_metrics(tables["binding_patching"], tables["binding_ablation"]),
        "aids": aids_metrics(aids),
        "llc": llc_metrics(tables["binding_llc"], tables["binding_phases"]),
    }
    with atomic_path(path_of(params, "binding_plots")) as tmp:
        binding_plot_table(tables["binding_trajectory"]).to_csv(tmp, index=False)
    write_json(metrics, path_of(params, "binding_metrics"))
    write_text(html, path_of(params, "binding_report"))


if __name__ == "__main__":
    raise SystemExit(main())
