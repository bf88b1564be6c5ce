"""The local learning coefficient of one binding seed's saved checkpoints (llc; interp/llc.py): the
sampler's loss is the run's own objective (binding_train.format) on training-split programs."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.core.train.checkpoint import list_checkpoints
from emergence.interp.llc import every_kth, finite_checkpoints, llc_table, packed
from emergence.interp.llc_params import LLCParams
from emergence.studies.binding.batches import IGNORE, encode_programs
from emergence.studies.binding.program_io import load_programs, subset
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.train_config import train_params


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True)
    p = from_dict(LLCParams, section(params, "llc"), "llc")
    fmt = train_params(params, args.seed, "cpu")[0]
    train_rows = subset(load_programs(path_of(params, "binding_programs")), "train")
    data = encode_programs(train_rows["program"], train_rows["answer"], CharTokenizer(), fmt)
    rows, loss_fn = packed(data.idx, data.targets, IGNORE)
    ckpts = every_kth(list_checkpoints(path_of(params, "binding_runs") / f"seed{args.seed}"), p.every)
    table = llc_table(finite_checkpoints(ckpts), rows, loss_fn, p, args.seed).assign(seed=args.seed)
    write_parquet(table, path_of(params, "binding_llc") / f"seed{args.seed}.parquet")


if __name__ == "__main__":
    raise SystemExit(main())
