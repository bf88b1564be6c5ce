"""Attention saliency of one Transformer run at every checkpoint: head shares and layer flow
from v<ENV> to the prediction of v<LAN>, over the held-out matched contexts."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.io import write_parquet
from emergence.studies.grounding import inputs
from emergence.studies.grounding.saliency import SALIENCY_COLUMNS, matched_inputs, saliency_table


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True)
    run = inputs.checked_run(args.model, args.seed)
    batch_size = inputs.saliency_batch_size(params)
    _, index = inputs.vocab_index(params)
    contexts, targets, env_pos = matched_inputs(inputs.eval_set(params), index)
    models = inputs.checkpoint_models(params, run, "saliency")
    out = saliency_table(models, contexts, targets, env_pos, batch_size).assign(model=args.model, seed=args.seed)
    write_parquet(out[["model", "seed", *SALIENCY_COLUMNS]], inputs.run_file(params, "grounding_saliency", run))


if __name__ == "__main__":
    raise SystemExit(main())
