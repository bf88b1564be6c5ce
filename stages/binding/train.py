"""Train one seed of the variable-binding study's model: on the training split, or on fresh programs
drawn every step (binding_train.stream), never on an evaluation program."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import path_of
from emergence.studies.binding.training import train_binding


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True)
    run = f"seed{args.seed}"
    out, scratch = path_of(params, "binding_runs") / run, path_of(params, "binding_scratch") / run
    train_binding(params, args.seed, out, scratch, where="binding_train")


if __name__ == "__main__":
    raise SystemExit(main())
