"""Render reports/grounding.html, its DVC metrics JSON and plots CSV from the gain tables."""
from __future__ import annotations

import json

import pandas as pd

from emergence.cli import stage_main, start_stage
from emergence.config import from_dict, path_of, section
from emergence.data.grounding import GroundingRuns, run_name
from emergence.io import PipelineError, atomic_path, read_parquet, write_json, write_text
from emergence.report.grounding import gain_by_checkpoint, grounding_metrics, grounding_page, plot_table
from emergence.report.provenance import provenance


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    runs = from_dict(GroundingRuns, section(params, "grounding_runs"), "grounding_runs")
    gain_files = [path_of(params, "grounding_gain") / f"{run_name(a, s)}.parquet"
                  for a in runs.archs for s in runs.seeds]
    rows = pd.concat([read_parquet(p, {"arch": "O", "seed": "i", "step": "i", "gain": "f"}) for p in gain_files],
                     ignore_index=True)
    counts_path = path_of(params, "childes_counts")
    try:
        counts = json.loads(counts_path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise PipelineError(f"{counts_path}: unreadable ({e.__class__.__name__})") from e
    targets = read_parquet(path_of(params, "grounding_targets"), {"word": "O"})
    eval_set = read_parquet(path_of(params, "grounding_eval"), {"word": "O", "context": "O"})
    curve = gain_by_checkpoint(rows)
    inputs = [counts_path, path_of(params, "grounding_targets"), path_of(params, "grounding_eval"), *gain_files]
    record = provenance(params, runs.seeds, inputs, ("childes", "grounding"))
    html = grounding_page(counts, targets, eval_set, curve, record)
    with atomic_path(path_of(params, "grounding_plots")) as tmp:
        plot_table(curve).to_csv(tmp, index=False)
    write_json(grounding_metrics(curve), path_of(params, "grounding_metrics"))
    write_text(html, path_of(params, "grounding_report"))


if __name__ == "__main__":
    raise SystemExit(main())
