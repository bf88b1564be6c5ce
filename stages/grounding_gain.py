"""Surprisal of v<LAN> after matched and mismatched v<ENV>, per checkpoint of one run."""
from __future__ import annotations

import pandas as pd
from tqdm import tqdm

from emergence.analysis.grounding_gain import gain_rows
from emergence.cli import stage_main, start_stage
from emergence.config import path_of
from emergence.data.grounding import read_vocab, run_name
from emergence.io import PipelineError, read_parquet, write_parquet
from emergence.train import list_checkpoints, load_checkpoint


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_arch=True)
    _, vocab = read_vocab(path_of(params, "grounding_vocab"))
    index = {t: i for i, t in enumerate(vocab)}
    eval_set = read_parquet(path_of(params, "grounding_eval"), {"word": "O", "context": "O", "others": "O"})
    run = run_name(args.arch, args.seed)
    ckpts = list_checkpoints(path_of(params, "grounding_runs") / run)
    if not ckpts:
        raise PipelineError(f"{path_of(params, 'grounding_runs') / run}: no checkpoints")
    tables = []
    for step, path in tqdm(ckpts, desc=f"gain {run}"):
        table = gain_rows(load_checkpoint(path)[0], eval_set, index)
        table.insert(0, "step", step)
        tables.append(table)
    out = pd.concat(tables, ignore_index=True)
    out.insert(0, "arch", args.arch)
    out.insert(1, "seed", args.seed)
    write_parquet(out, path_of(params, "grounding_gain") / f"{run}.parquet")


if __name__ == "__main__":
    raise SystemExit(main())
