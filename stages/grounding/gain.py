"""Surprisal of v<LAN> after the matched and the mismatched environment, per checkpoint of one run:
v<ENV> vs u<ENV> (childes, caption), or the dialog's own image vs other images (image)."""

from __future__ import annotations

import pandas as pd
from tqdm import tqdm

from emergence.core.cli import stage_main, start_stage
from emergence.core.io import write_parquet
from emergence.core.train.checkpoint import load_checkpoint
from emergence.studies.grounding.gain import gain_rows
from emergence.studies.grounding.settings import Setting
from emergence.studies.grounding.visual_gain import image_gain_rows


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True, per_setting=True)
    setting = Setting(args.setting)
    run = setting.run(args.model, args.seed)
    _, index = setting.corpus.vocab_index(params)
    eval_set = setting.corpus.eval_set(params)
    feats, image_row = setting.environment(params)

    def measure(model):
        if setting.name == "image":
            return image_gain_rows(model, eval_set, index, feats, image_row)
        return gain_rows(model, eval_set, index)

    ckpts = setting.checkpoints(params, run)
    tables = [measure(load_checkpoint(path)[0]).assign(step=step) for step, path in tqdm(ckpts, desc=f"gain {run}")]
    keys = setting.keys(args.model, args.seed)
    out = pd.concat(tables, ignore_index=True).assign(**keys)
    write_parquet(out[[*keys, "step", *tables[0].columns.drop("step")]], setting.run_file(params, "gain", run))


if __name__ == "__main__":
    raise SystemExit(main())
