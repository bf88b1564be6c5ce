"""Score one seed's model on every stress-suite distribution, the reference sets of both generators and
the generalisation grid, by hop count."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.core.train import load_named_checkpoint
from emergence.studies.binding.program_io import load_programs
from emergence.studies.binding.stress import StressParams, stress_accuracy


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True)
    p = from_dict(StressParams, section(params, "binding_stress"), "binding_stress")
    step, model = load_named_checkpoint(
        path_of(params, "binding_runs") / f"seed{args.seed}", p.checkpoint, "binding_stress.checkpoint"
    )
    programs = load_programs(path_of(params, "binding_programs"))
    evaluated = programs[(programs["set"] == "gen") | programs["set"].str.startswith(("stress_", "ref_"))]
    table = stress_accuracy(model, evaluated, args.seed, step)
    write_parquet(table, path_of(params, "binding_stress") / f"seed{args.seed}.parquet")
    print(table.groupby("set")[["n", "correct"]].sum().assign(accuracy=lambda t: t["correct"] / t["n"]).to_string())


if __name__ == "__main__":
    raise SystemExit(main())
