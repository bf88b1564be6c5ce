"""Zero-ablate one visual-dialogue Transformer run's aggregate (and gather) heads at every checkpoint,
against as many random heads from the same layers, and record v<LAN>'s matched surprisal per dialog
(image setting: read after its own image)."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, section
from emergence.core.io import read_parquet, write_parquet
from emergence.studies.grounding import visual_inputs as inputs
from emergence.studies.grounding.ablation import HeadAblationParams, checkpoint_ablations
from emergence.studies.grounding.saliency import HEAD_COLUMNS
from emergence.studies.grounding.visual_gain import matched_visual_inputs


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True, per_setting=True)
    run = inputs.checked_run(args.setting, args.model, args.seed)
    p = from_dict(HeadAblationParams, section(params, "visual_ablation"), "visual_ablation")
    heads = read_parquet(inputs.run_file(params, "visual_heads", run), HEAD_COLUMNS)
    _, index = inputs.vocab_index(params)
    contexts, targets, _, prefixes = matched_visual_inputs(
        args.setting, inputs.eval_set(params), index, *inputs.environment(params, args.setting)
    )
    models = inputs.checkpoint_models(params, run, "ablation")
    out = checkpoint_ablations(models, heads, contexts, targets, p, prefixes)
    out = out.assign(setting=args.setting, model=args.model, seed=args.seed)
    first = ["setting", "model", "seed", "step", "kind"]
    write_parquet(
        out[first + [c for c in out.columns if c not in first]], inputs.run_file(params, "visual_ablation", run)
    )


if __name__ == "__main__":
    raise SystemExit(main())
