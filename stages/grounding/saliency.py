"""Attention saliency of one Transformer run at every checkpoint: head shares and layer flow from
the environment (v<ENV>; in the image setting the image's prefix positions) to the prediction of
v<LAN>, over the matched held-out contexts."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.io import write_parquet
from emergence.studies.grounding.inputs import saliency_batch_size
from emergence.studies.grounding.saliency import SALIENCY_COLUMNS, saliency_table
from emergence.studies.grounding.settings import Setting


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True, per_setting=True)
    setting = Setting(args.setting)
    run = setting.run(args.model, args.seed)
    batch_size = saliency_batch_size(params, setting.key("saliency"))
    _, index = setting.corpus.vocab_index(params)
    contexts, targets, env_pos, prefixes = setting.matched_inputs(params, index)
    models = setting.checkpoint_models(params, run, "saliency")
    keys = setting.keys(args.model, args.seed)
    out = saliency_table(models, contexts, targets, env_pos, batch_size, prefixes).assign(**keys)
    write_parquet(out[[*keys, *SALIENCY_COLUMNS]], setting.run_file(params, "saliency", run))


if __name__ == "__main__":
    raise SystemExit(main())
