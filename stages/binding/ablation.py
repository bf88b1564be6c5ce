"""Ablate every attention head (zero and mean) of one seed's model; accuracy drop by hops."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.core.train.checkpoint import load_named_checkpoint
from emergence.studies.binding.ablation import ablation_table
from emergence.studies.binding.ablation_params import BindingAblationParams
from emergence.studies.binding.batches import encode_programs
from emergence.studies.binding.program_io import load_programs, subset
from emergence.studies.binding.tokenizer import CharTokenizer


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True)
    p = from_dict(BindingAblationParams, section(params, "binding_ablation"), "binding_ablation")
    run_dir = path_of(params, "binding_runs") / f"seed{args.seed}"
    step, model = load_named_checkpoint(run_dir, p.checkpoint, "binding_ablation.checkpoint")
    tok = CharTokenizer()
    test = subset(
        load_programs(path_of(params, "binding_programs")), "test", n=p.n_programs, key="binding_ablation.n_programs"
    )
    data = encode_programs(test["program"], test["answer"], tok)
    table = ablation_table(model, data, test["hops"].to_numpy(), tok, seed=args.seed, step=step, modes=p.modes)
    write_parquet(table, path_of(params, "binding_ablation") / f"seed{args.seed}.parquet")


if __name__ == "__main__":
    raise SystemExit(main())
