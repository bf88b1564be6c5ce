"""Generate the binding study's programs: train/val/test splits, the generalisation grid, the stress suite."""

from __future__ import annotations

import numpy as np
import pandas as pd

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import path_of
from emergence.core.io import write_json, write_parquet
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import (
    DataParams,
    generalisation_table,
    generate_table,
    heuristic_table,
    load_data_params,
    split_sizes,
)
from emergence.studies.binding.stress import stress_table

SPLITS = ("train", "val", "test")


def build_programs(data: DataParams, cfg: ProgramConfig) -> pd.DataFrame:
    rng = np.random.default_rng(data.seed)
    main_set = generate_table(rng, cfg, data.n_programs, set_name="main", progress=True)
    main_set["split"] = np.repeat(SPLITS, split_sizes(data.n_programs, data.split))
    gen = generalisation_table(rng, cfg, data.gen_per_cell, data.gen_lines, data.gen_hops, progress=True)
    gen["split"] = "test"
    stress = stress_table(rng, cfg, data.stress_per_hop, progress=True)
    stress["split"] = "test"
    return pd.concat([main_set, gen, stress], ignore_index=True)


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    data, cfg = load_data_params(params)
    programs = build_programs(data, cfg)
    train = programs[(programs["set"] == "main") & (programs["split"] == "train")]
    table = heuristic_table(train)
    print("Heuristic match rate on the training split (chance = 0.10):")
    print(table.to_string(index=False, float_format="{:.4f}".format))
    write_parquet(programs, path_of(params, "binding_programs"))
    write_json(
        {row.heuristic: round(row.match_rate, 6) for row in table.itertuples()}, path_of(params, "binding_heuristics")
    )


if __name__ == "__main__":
    raise SystemExit(main())
