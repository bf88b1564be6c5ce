"""The local learning coefficient of one CHILDES grounding run's saved checkpoints (llc; interp/llc.py):
the sampler's loss is the run's next-token loss on its training windows."""

from __future__ import annotations

import torch

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.core.train.checkpoint import list_checkpoints
from emergence.interp.llc import every_kth, finite_checkpoints, llc_table, next_token
from emergence.interp.llc_params import LLCParams
from emergence.studies.grounding.settings import Setting
from emergence.studies.grounding.tokens import run_name, training_windows


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True)
    p = from_dict(LLCParams, section(params, "llc"), "llc")
    setting = Setting("childes")
    _, index = setting.corpus.vocab_index(params)
    held_out = set(setting.corpus.eval_set(params)["turn"].tolist())
    seq_len, key = setting.corpus.seq_len(params), f"{setting.key('train')}.seq_len"
    windows = training_windows(setting.corpus.table(params), held_out, index, seq_len, key)
    rows, loss_fn = next_token(torch.as_tensor(windows, dtype=torch.long))
    run = run_name(args.model, args.seed)
    ckpts = every_kth(list_checkpoints(path_of(params, "grounding_runs") / run), p.every)
    table = llc_table(finite_checkpoints(ckpts), rows, loss_fn, p, args.seed).assign(model=args.model, seed=args.seed)
    write_parquet(table, path_of(params, "grounding_llc") / f"{run}.parquet")


if __name__ == "__main__":
    raise SystemExit(main())
