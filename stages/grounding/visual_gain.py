"""Surprisal of v<LAN> in held-out dialogs with the matched and mismatched environment (caption
v<ENV> vs u<ENV>, or own image vs other images), per checkpoint of one run."""

from __future__ import annotations

import pandas as pd
from tqdm import tqdm

from emergence.core.cli import stage_main, start_stage
from emergence.core.io import write_parquet
from emergence.core.train import load_checkpoint
from emergence.studies.grounding import visual_inputs as inputs
from emergence.studies.grounding.gain import gain_rows
from emergence.studies.grounding.visual_gain import image_gain_rows


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True, per_setting=True)
    run = inputs.checked_run(args.setting, args.model, args.seed)
    _, index = inputs.vocab_index(params)
    eval_set = inputs.eval_set(params)
    feats, image_row = inputs.environment(params, args.setting)

    def measure(model):
        if args.setting == "image":
            return image_gain_rows(model, eval_set, index, feats, image_row)
        return gain_rows(model, eval_set, index)

    ckpts = inputs.run_checkpoints(params, run)
    tables = [measure(load_checkpoint(path)[0]).assign(step=step) for step, path in tqdm(ckpts, desc=f"gain {run}")]
    out = pd.concat(tables, ignore_index=True).assign(setting=args.setting, model=args.model, seed=args.seed)
    write_parquet(
        out[["setting", "model", "seed", "step", *tables[0].columns.drop("step")]],
        inputs.run_file(params, "visual_gain", run),
    )


if __name__ == "__main__":
    raise SystemExit(main())
