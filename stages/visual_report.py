"""Render reports/grounding_visual.html and its DVC metrics from the visual-dialogue gain tables."""
from __future__ import annotations

import json

import pandas as pd

from emergence.cli import stage_main, start_stage
from emergence.config import path_of
from emergence.data import visual_inputs as inputs
from emergence.io import PipelineError, read_parquet, write_json, write_text
from emergence.report.grounding_visual import visual_curve, visual_metrics, visual_page
from emergence.report.provenance import provenance


def read_json(path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise PipelineError(f"{path}: unreadable ({e.__class__.__name__})") from e


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    runs = inputs.runs_of(params)
    files = [inputs.run_file(params, "visual_gain", run) for run in runs.names()]
    rows = pd.concat([read_parquet(f, {"setting": "O", "model": "O", "seed": "i", "step": "i", "word": "O",
                                       "gain": "f"}) for f in files], ignore_index=True)
    counts = read_json(path_of(params, "visual_counts"))
    encoder_path = path_of(params, "visual_features") / "encoder.json"
    encoder = read_json(encoder_path)
    targets = read_parquet(path_of(params, "visual_targets"), {"word": "O"})
    curve = visual_curve(rows)
    used = [path_of(params, "visual_counts"), encoder_path, path_of(params, "visual_targets"),
            path_of(params, "visual_eval"), *files]
    record = provenance(params, runs.seeds, used, ("visual", "visdial", "dino", "grounding_models"))
    write_json({"encoder_pretrained": bool(encoder.get("pretrained")), **visual_metrics(curve)},
               path_of(params, "visual_metrics"))
    write_text(visual_page(counts, targets, inputs.eval_set(params), encoder, curve, record),
               path_of(params, "visual_report"))


if __name__ == "__main__":
    raise SystemExit(main())
