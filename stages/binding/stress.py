"""Score one seed's model on every stress-suite distribution, the reference sets of both generators and
the generalisation grid, by hop count; with binding_stress.curve_every, the suite at earlier
checkpoints too (stress accuracy against training)."""

from __future__ import annotations

import pandas as pd
from tqdm import tqdm

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.core.train.checkpoint import find_checkpoint, list_checkpoints, load_checkpoint
from emergence.studies.binding.program_io import load_programs
from emergence.studies.binding.stress import curve_steps, stress_accuracy
from emergence.studies.binding.stress_params import StressParams


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True)
    p = from_dict(StressParams, section(params, "binding_stress"), "binding_stress")
    run_dir = path_of(params, "binding_runs") / f"seed{args.seed}"
    named, _ = find_checkpoint(run_dir, p.checkpoint, "binding_stress.checkpoint")
    paths = dict(list_checkpoints(run_dir))
    programs = load_programs(path_of(params, "binding_programs"))
    suite = programs[programs["set"].str.startswith(("stress_", "ref_"))]
    with_grid = pd.concat([suite, programs[programs["set"] == "gen"]])  # the grid at the named step only
    tables = []
    for step in tqdm(curve_steps(sorted(paths), named, p.curve_every), desc="checkpoints"):
        model = load_checkpoint(paths[step])[0]
        scored = stress_accuracy(model, with_grid if step == named else suite, args.seed, step)
        tables.append(scored.assign(named=step == named))
    table = pd.concat(tables, ignore_index=True)
    write_parquet(table, path_of(params, "binding_stress") / f"seed{args.seed}.parquet")
    final = table[table["named"]].groupby("set")[["n", "correct"]].sum()
    print(final.assign(accuracy=lambda t: t["correct"] / t["n"]).to_string())


if __name__ == "__main__":
    raise SystemExit(main())
