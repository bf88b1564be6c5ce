"""Train one seed of the binding model without one of the default's aids (binding_aids; the variants:
emergence.studies.binding.aids.AIDS), on the same distribution and budget as binding_train."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import path_of
from emergence.studies.binding.aids import without_aid
from emergence.studies.binding.training import train_binding


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_aid=True)
    run = f"{args.aid}/seed{args.seed}"
    out, scratch = path_of(params, "binding_aid_runs") / run, path_of(params, "binding_scratch") / "aids" / run
    train_binding(without_aid(params, args.aid), args.seed, out, scratch, where="binding_train")


if __name__ == "__main__":
    raise SystemExit(main())
