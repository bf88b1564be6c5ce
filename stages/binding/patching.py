"""Residual-stream interchange interventions on one seed's trained model, and each head's output
patched at every step of the query chain (heads per dereference step)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.core.train.checkpoint import load_named_checkpoint
from emergence.studies.binding.patching import head_step_table, make_counterfactual_pairs, patching_table
from emergence.studies.binding.patching_params import PatchingParams
from emergence.studies.binding.program_io import load_programs, subset
from emergence.studies.binding.tokenizer import CharTokenizer


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True)
    p = from_dict(PatchingParams, section(params, "binding_patching"), "binding_patching")
    run_dir = path_of(params, "binding_runs") / f"seed{args.seed}"
    step, model = load_named_checkpoint(run_dir, p.checkpoint, "binding_patching.checkpoint")
    test = subset(load_programs(path_of(params, "binding_programs")), "test")
    pairs = make_counterfactual_pairs(test, np.random.default_rng(args.seed), p.n_pairs)
    tok = CharTokenizer()
    table = pd.concat(
        [
            patching_table(model, pairs, tok, seed=args.seed, step=step),
            head_step_table(model, pairs, tok, seed=args.seed, step=step),  # heads per dereference step
        ],
        ignore_index=True,
    )
    write_parquet(table, path_of(params, "binding_patching") / f"seed{args.seed}.parquet")


if __name__ == "__main__":
    raise SystemExit(main())
