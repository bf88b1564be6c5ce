"""Generate the binding study's programs: train/val/test splits plus generalisation sets."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.studies.binding.programs import ProgramConfig, generalisation_table, generate_table, heuristic_table
from emergence.core.io import PipelineError, write_json, write_parquet

SPLITS = ("train", "val", "test")


@dataclasses.dataclass
class DataParams:
    """binding_data keys that are not the generator's own (those go to ProgramConfig)."""

    n_programs: int
    split: tuple[float, float, float] = (0.9, 0.002, 0.098)
    gen_per_cell: int = 10
    gen_lines: tuple[int, int] = (2, 25)
    gen_hops: tuple[int, int] = (1, 13)
    seed: int = 0

    def validate(self, where: str) -> None:
        if self.n_programs < 3:
            raise PipelineError(f"{where}.n_programs: need at least 3 programs, got {self.n_programs}")
        if any(f < 0 for f in self.split) or abs(sum(self.split) - 1.0) > 1e-9:
            raise PipelineError(f"{where}.split: three non-negative fractions summing to 1, got {list(self.split)}")
        if min(split_sizes(self.n_programs, self.split)) < 1:
            raise PipelineError(f"{where}.split: every split needs >= 1 of {self.n_programs} programs")
        if self.gen_per_cell < 0:
            raise PipelineError(f"{where}.gen_per_cell: must be >= 0, got {self.gen_per_cell}")
        for key in ("gen_lines", "gen_hops"):
            lo, hi = getattr(self, key)
            if lo > hi:
                raise PipelineError(f"{where}.{key}: range [{lo}, {hi}] is empty")


def split_sizes(n: int, fractions: tuple[float, ...]) -> list[int]:
    """Sizes of consecutive splits; rounding slack goes to the last one."""
    sizes = [int(round(n * f)) for f in fractions[:-1]]
    return sizes + [n - sum(sizes)]


def load_data_params(params: dict) -> tuple[DataParams, ProgramConfig]:
    values = section(params, "binding_data")
    own = {f.name for f in dataclasses.fields(DataParams)}
    data = from_dict(DataParams, {k: v for k, v in values.items() if k in own}, "binding_data")
    program = from_dict(ProgramConfig, {k: v for k, v in values.items() if k not in own}, "binding_data")
    return data, program


def build_programs(data: DataParams, cfg: ProgramConfig) -> pd.DataFrame:
    rng = np.random.default_rng(data.seed)
    main_set = generate_table(rng, cfg, data.n_programs, set_name="main", progress=True)
    main_set["split"] = np.repeat(SPLITS, split_sizes(data.n_programs, data.split))
    gen = generalisation_table(rng, cfg, data.gen_per_cell, data.gen_lines, data.gen_hops, progress=True)
    gen["split"] = "test"
    return pd.concat([main_set, gen], ignore_index=True)


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
    write_json({row.heuristic: round(row.match_rate, 6) for row in table.itertuples()},
               path_of(params, "binding_heuristics"))


if __name__ == "__main__":
    raise SystemExit(main())
