"""Render reports/grounding_visual.html and its DVC metrics from the visual-dialogue gain, saliency,
heads and ablation tables."""

from __future__ import annotations

import json

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import PipelineError, read_parquet, write_json, write_text
from emergence.core.report.interactive import bundle_src
from emergence.core.report.provenance import provenance
from emergence.studies.grounding import visual_inputs as inputs
from emergence.studies.grounding.inputs import RUN_KEYS, per_run
from emergence.studies.grounding.report_visual import mechanism_sections, visual_curve, visual_metrics, visual_page
from emergence.studies.grounding.saliency_params import HeadParams

KEYS = {"setting": "O", **RUN_KEYS}


def read_json(path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise PipelineError(f"{path}: unreadable ({e.__class__.__name__})") from e


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    runs = inputs.runs_of(params)
    attention_runs = runs.names(inputs.attention_models(params).models)
    head_params = from_dict(HeadParams, section(params, "visual_heads"), "visual_heads")
    rows, gain_files = per_run(params, "visual_gain", runs.names(), {"word": "O", "gain": "f"}, KEYS)
    saliency, sal_files = per_run(
        params, "visual_saliency", attention_runs, {"layer": "i", "head": "i", "metric": "O", "value": "f"}, KEYS
    )
    heads, head_files = per_run(params, "visual_heads", attention_runs, {"layer": "i", "kind": "O"}, KEYS)
    ablation, abl_files = per_run(
        params,
        "visual_ablation",
        attention_runs,
        {"kind": "O", "original": "f", "intervention": "f", "control": "f", "n_heads": "i", "n_control_heads": "i"},
        KEYS,
    )
    counts = read_json(path_of(params, "visual_counts"))
    encoder_path = path_of(params, "visual_features") / "encoder.json"
    encoder = read_json(encoder_path)
    targets = read_parquet(path_of(params, "visual_targets"), {"word": "O"})
    curve = visual_curve(rows)
    used = [
        path_of(params, "visual_counts"),
        encoder_path,
        path_of(params, "visual_targets"),
        path_of(params, "visual_eval"),
        *gain_files,
        *sal_files,
        *head_files,
        *abl_files,
    ]
    record = provenance(params, runs.seeds, used, ("visual", "visdial", "dino", "grounding_models"))
    plotly_src = bundle_src(path_of(params, "visual_report"), path_of(params, "plotly_js"))
    write_json(
        {"encoder_pretrained": bool(encoder.get("pretrained")), **visual_metrics(curve, ablation)},
        path_of(params, "visual_metrics"),
    )
    mechanisms = mechanism_sections(saliency, heads, ablation, head_params.threshold, head_params.image_baseline)
    write_text(
        visual_page(counts, targets, inputs.eval_set(params), encoder, curve, mechanisms, record, plotly_src),
        path_of(params, "visual_report"),
    )


if __name__ == "__main__":
    raise SystemExit(main())
