"""Render reports/associations.html, its DVC metrics JSON and plots CSV from the analyses."""

from __future__ import annotations

import json

import pandas as pd

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import PipelineError, atomic_path, read_parquet, write_json, write_text
from emergence.core.report.interactive import bundle_src
from emergence.core.report.provenance import provenance
from emergence.studies.assoc.compare_params import AssocRuns, CompareParams
from emergence.studies.assoc.report import assoc_metrics, associations_page, plot_table


def read_json(path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as e:
        raise PipelineError(f"{path}: not found (run assoc_corpus first)") from e
    except json.JSONDecodeError as e:
        raise PipelineError(f"{path}: not valid JSON ({e})") from e


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    runs_params = from_dict(AssocRuns, section(params, "assoc_runs"), "assoc_runs")
    runs = runs_params.names()
    cosine_files = [path_of(params, "assoc_cosines") / f"{run}.parquet" for run in runs]
    causal_files = [path_of(params, "assoc_causal") / f"{run}.parquet" for run in runs]
    basis = from_dict(CompareParams, section(params, "assoc_compare"), "assoc_compare").basis
    both = pd.concat(
        [read_parquet(p, {"n_layers": "i", "step": "i", "cosine": "f", "basis": "O"}) for p in cosine_files],
        ignore_index=True,
    )
    # the leading basis feeds the metrics, claims and plots; the other stands beside it on the page
    cosines, other = both[both["basis"] == basis], both[both["basis"] != basis]
    causal = pd.concat([read_parquet(p, {"n_layers": "i", "loss": "f"}) for p in causal_files], ignore_index=True)
    order = read_parquet(path_of(params, "assoc_order"), {"eta": "f", "step": "i", "rel_error": "f"})
    words = read_parquet(path_of(params, "assoc_words"), {"probe": "O", "matrix": "O", "token": "O"})
    summary_path = path_of(params, "assoc_corpus_summary")
    inputs = [
        summary_path,
        path_of(params, "assoc_order"),
        path_of(params, "assoc_words"),
        *cosine_files,
        *causal_files,
    ]
    html = associations_page(
        read_json(summary_path),
        cosines,
        order,
        causal,
        words,
        provenance(params, runs_params.seeds, inputs, ("assoc",)),
        other=other,
        plotly_src=bundle_src(path_of(params, "assoc_report"), path_of(params, "plotly_js")),
    )
    with atomic_path(path_of(params, "assoc_plots")) as tmp:
        plot_table(cosines).to_csv(tmp, index=False)
    write_json(assoc_metrics(cosines, order, causal) | {"basis": basis}, path_of(params, "assoc_metrics"))
    write_text(html, path_of(params, "assoc_report"))


if __name__ == "__main__":
    raise SystemExit(main())
