"""Attention saliency of one Transformer run at every checkpoint: head shares and layer flow
from v<ENV> to the prediction of v<LAN>, over the held-out matched contexts."""
from __future__ import annotations

import pandas as pd
from tqdm import tqdm

from emergence.analysis.grounding_saliency import matched_inputs, saliency_rows
from emergence.cli import stage_main, start_stage
from emergence.data import grounding_inputs as inputs
from emergence.io import write_parquet
from emergence.train import load_checkpoint


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True)
    run = inputs.checked_attention_run(params, args.model, args.seed)
    batch_size = inputs.attention_models(params).batch_size
    _, index = inputs.vocab_index(params)
    contexts, targets, env_pos = matched_inputs(inputs.eval_set(params), index)
    tables = []
    for step, path in tqdm(inputs.run_checkpoints(params, run), desc=f"saliency {run}"):
        model = load_checkpoint(path)[0]
        tables.append(saliency_rows(model, contexts, targets, env_pos, batch_size).assign(step=step))
    out = pd.concat(tables, ignore_index=True).assign(model=args.model, seed=args.seed)
    write_parquet(out[["model", "seed", "step", "layer", "head", "metric", "value"]],
                  inputs.run_file(params, "grounding_saliency", run))


if __name__ == "__main__":
    raise SystemExit(main())
