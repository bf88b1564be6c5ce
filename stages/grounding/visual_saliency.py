"""Attention saliency of one visual-dialogue Transformer run at every checkpoint: head shares and layer
flow from the environment (caption setting: the caption's v<ENV>; image setting: the image's prefix
positions) to the prediction of v<LAN>, over the matched held-out dialogs."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.io import write_parquet
from emergence.studies.grounding import visual_inputs as inputs
from emergence.studies.grounding.inputs import saliency_batch_size
from emergence.studies.grounding.saliency import SALIENCY_COLUMNS, saliency_table
from emergence.studies.grounding.visual_gain import matched_visual_inputs


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True, per_setting=True)
    run = inputs.checked_run(args.setting, args.model, args.seed)
    batch_size = saliency_batch_size(params, "visual_saliency")
    _, index = inputs.vocab_index(params)
    contexts, targets, env_pos, prefixes = matched_visual_inputs(
        args.setting, inputs.eval_set(params), index, *inputs.environment(params, args.setting)
    )
    models = inputs.checkpoint_models(params, run, "saliency")
    out = saliency_table(models, contexts, targets, env_pos, batch_size, prefixes)
    out = out.assign(setting=args.setting, model=args.model, seed=args.seed)
    write_parquet(out[["setting", "model", "seed", *SALIENCY_COLUMNS]], inputs.run_file(params, "visual_saliency", run))


if __name__ == "__main__":
    raise SystemExit(main())
