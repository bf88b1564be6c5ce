"""Render reports/grounding.html, its DVC metrics JSON and plots CSV from the study's tables."""

from __future__ import annotations

import json

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import PipelineError, atomic_path, read_parquet, write_json, write_text
from emergence.core.report.interactive import bundle_src
from emergence.core.report.provenance import provenance
from emergence.studies.grounding import inputs
from emergence.studies.grounding import report_mech as mech
from emergence.studies.grounding.inputs import RUN_KEYS, per_run
from emergence.studies.grounding.marking import default_word_gains, rule_table
from emergence.studies.grounding.report import (
    gain_by_checkpoint,
    grounding_metrics,
    grounding_page,
    plot_table,
    seed_table,
)
from emergence.studies.grounding.tokens import LLCRuns, read_vocab
from stages.grounding.cooc import WORD_SCORES


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    runs = inputs.runs_of(params)
    attention_runs = [f"{m}_seed{s}" for m in inputs.attention_models(params).models for s in runs.seeds]
    gain, gain_files = per_run(params, "grounding_gain", runs.names(), WORD_SCORES)
    lens, lens_files = per_run(params, "grounding_lens", runs.names(), {"lens": "O", "layer": "i", "gain": "f"})
    saliency, sal_files = per_run(
        params, "grounding_saliency", attention_runs, {"layer": "i", "head": "i", "metric": "O", "value": "f"}
    )
    heads, head_files = per_run(params, "grounding_heads", attention_runs, {"layer": "i", "kind": "O"})
    ablation, abl_files = per_run(
        params,
        "grounding_ablation",
        attention_runs,
        {"kind": "O", "original": "f", "intervention": "f", "control": "f"},
    )
    llc_runs = from_dict(LLCRuns, section(params, "grounding_llc"), "grounding_llc").names()
    llc, llc_files = per_run(params, "grounding_llc", llc_runs, {"step": "i", "chain": "i", "llc": "f"})
    cooc = read_parquet(path_of(params, "grounding_cooc"), {**RUN_KEYS, "r2": "f"})
    cooc_words = read_parquet(path_of(params, "grounding_cooc_words"), {"word": "O"})
    counts_path = path_of(params, "childes_counts")
    try:
        counts = json.loads(counts_path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise PipelineError(f"{counts_path}: unreadable ({e.__class__.__name__})") from e
    targets = read_parquet(path_of(params, "grounding_targets"), {"word": "O"})
    eval_set = inputs.eval_set(params)
    curve = gain_by_checkpoint(gain)
    template_gain, template_files = per_run(params, "grounding_template_gain", runs.names(), WORD_SCORES)
    template_curve = gain_by_checkpoint(template_gain)
    templates = read_parquet(
        path_of(params, "grounding_templates"), {"template": "O", "context": "O", "n_unk": "i", "source": "O"}
    )
    models = section(params, "grounding_models")
    n_layers = {m: models[m].get("n_layers") for m in inputs.attention_models(params).models}
    mechanisms = [
        (
            "Learning beyond co-occurrence",
            mech.cooc_section(cooc, cooc_words, section(params, "grounding_cooc")["features"]),
        ),
        ("Tuned lens: where the gain appears", mech.lens_section(lens)),
        ("Saliency flow by layer", mech.saliency_section(saliency)),
        (
            "Aggregate and gather heads",
            mech.heads_section(heads, saliency, section(params, "grounding_heads")["threshold"]),
        ),
        ("Head ablation", mech.ablation_section(ablation)),
        ("Table 2 at CPU scale", mech.table2_section(heads, saliency, ablation, n_layers)),
        ("Local learning coefficient", mech.llc_section(llc)),
    ]
    ablation_path = path_of(params, "grounding_marking") / "gain.parquet"
    rule_ablation = read_parquet(ablation_path, {"measure": "O", "word": "O", "gain": "f", "model": "O", "seed": "i"})
    if rule_ablation.empty:
        raise PipelineError(f"{ablation_path}: no rows (grounding_marking writes one per word and measure)")
    first = rule_ablation.iloc[0]
    rules = rule_table(default_word_gains(gain, template_gain, first["model"], first["seed"]), rule_ablation)
    inputs_read = [
        ablation_path,
        counts_path,
        path_of(params, "grounding_vocab"),
        path_of(params, "grounding_targets"),
        path_of(params, "grounding_eval"),
        path_of(params, "grounding_cooc"),
        path_of(params, "grounding_cooc_words"),
        path_of(params, "grounding_templates"),
        *gain_files,
        *template_files,
        *lens_files,
        *sal_files,
        *head_files,
        *abl_files,
        *llc_files,
    ]
    record = provenance(params, runs.seeds, inputs_read, ("childes", "grounding"))
    marking = read_vocab(path_of(params, "grounding_vocab"))[2]  # the rule the data were built with
    html = grounding_page(
        counts,
        targets,
        eval_set,
        curve,
        mechanisms,
        record,
        marking,
        templates,
        template_curve,
        seed_table(gain, template_gain),
        (rules, f"{first['model']} seed {first['seed']}"),
        plotly_src=bundle_src(path_of(params, "grounding_report"), path_of(params, "plotly_js")),
    )
    with atomic_path(path_of(params, "grounding_plots")) as tmp:
        plot_table(curve).to_csv(tmp, index=False)
    write_json(
        {
            "gain": grounding_metrics(curve),
            "template_gain": grounding_metrics(template_curve),
            "ablation": mech.ablation_metrics(ablation),
            "table2": mech.table2_metrics(heads, saliency, ablation),
            "word_rule": {f"{r.measure}/{r.rule.split()[0]}": round(float(r.G), 5) for r in rules.itertuples()},
            "llc": mech.llc_metrics(llc),
        },
        path_of(params, "grounding_metrics"),
    )
    write_text(html, path_of(params, "grounding_report"))


if __name__ == "__main__":
    raise SystemExit(main())
