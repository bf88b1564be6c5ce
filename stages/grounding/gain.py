"""Surprisal of v<LAN> after matched and mismatched v<ENV>, per checkpoint of one run."""

from __future__ import annotations

import pandas as pd
from tqdm import tqdm

from emergence.core.cli import stage_main, start_stage
from emergence.core.io import write_parquet
from emergence.core.train import load_checkpoint
from emergence.studies.grounding import inputs
from emergence.studies.grounding.gain import gain_rows


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True)
    run = inputs.checked_run(args.model, args.seed)
    _, index = inputs.vocab_index(params)
    eval_set = inputs.eval_set(params)
    tables = []
    for step, path in tqdm(inputs.run_checkpoints(params, run), desc=f"gain {run}"):
        tables.append(gain_rows(load_checkpoint(path)[0], eval_set, index).assign(step=step))
    out = pd.concat(tables, ignore_index=True).assign(model=args.model, seed=args.seed)
    write_parquet(
        out[["model", "seed", "step", *tables[0].columns.drop("step")]], inputs.run_file(params, "grounding_gain", run)
    )


if __name__ == "__main__":
    raise SystemExit(main())
