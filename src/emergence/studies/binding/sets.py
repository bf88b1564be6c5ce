"""Sets of programs as tables: training distribution, generalisation grid, heuristic rates.

Every row's `answer` and `hops` come from `interpreter.run_program` reading the
program's text, and must agree with what the generator built.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import numpy as np
import pandas as pd
from annotated_types import Ge
from tqdm import tqdm

from emergence.core.config import from_dict, section
from emergence.core.io import PipelineError
from emergence.studies.binding.balanced import sample_balanced
from emergence.studies.binding.heuristics import HEURISTICS
from emergence.studies.binding.interpreter import run_program
from emergence.studies.binding.paper import Shape, sample_shaped
from emergence.studies.binding.programs import LETTERS, Program, ProgramConfig, hop_prior, python_rng


def draw(r, cfg: ProgramConfig, n: int, hops: int) -> Program:
    """One program of the configured distribution with `n` lines and `hops` hops."""
    return (
        sample_balanced(r, cfg, n, hops)
        if cfg.distribution == "balanced"
        else sample_shaped(r, n, hops, Shape(links=cfg.links, distractor=cfg.distractor), cfg.reject)
    )


def sample_program(
    rng: np.random.Generator, cfg: ProgramConfig, n_lines: int | None = None, hops: int | None = None
) -> Program:
    """One program; hops drawn from the cube-weighted prior unless given."""
    r = python_rng(rng)
    if hops is None:
        values, cum = hop_prior(cfg)
        hops = r.choices(values, cum_weights=cum)[0]
    return draw(r, cfg, cfg.n_lines if n_lines is None else n_lines, hops)


def program_table(programs: list[Program], set_name: str) -> pd.DataFrame:
    """One row per program; `answer` and `hops` as the interpreter reads the text."""
    texts = [p.text for p in programs]
    labels = [run_program(text) for text in texts]
    for p, (answer, hops) in zip(programs, labels):
        if (answer, hops) != (p.answer, p.hops):
            raise PipelineError(
                f"programs[{set_name}]: generated as answer {p.answer} in {p.hops} hops, read as answer {answer}"
                f" in {hops} hops: {p.text!r}"
            )
    df = pd.DataFrame(
        {
            "program": texts,
            "query": [p.query for p in programs],
            "answer": np.array([a for a, _ in labels], dtype=np.int64),
            "hops": np.array([h for _, h in labels], dtype=np.int64),
            "chain_lines": [list(p.chain_lines) for p in programs],
            "n_lines": np.array([len(p.lines) for p in programs], dtype=np.int64),
            "set": set_name,
        }
    )
    for name, heuristic in HEURISTICS.items():
        df[f"heur_{name}"] = np.array([heuristic(p) for p in programs], dtype=np.int64)
    return df


def generate_table(
    rng: np.random.Generator, cfg: ProgramConfig, n: int, *, set_name: str, progress: bool = False
) -> pd.DataFrame:
    """`n` training-distribution programs, one row each (see `program_table` for the columns)."""
    cfg.validate()
    r = python_rng(rng)
    values, cum = hop_prior(cfg)
    programs = [
        draw(r, cfg, cfg.n_lines, r.choices(values, cum_weights=cum)[0])
        for _ in tqdm(range(n), desc=f"programs[{set_name}]", disable=not progress)
    ]
    return program_table(programs, set_name)


def generalisation_table(
    rng: np.random.Generator,
    cfg: ProgramConfig,
    n_per_cell: int,
    lines_range: tuple[int, int] = (2, 25),
    hops_range: tuple[int, int] = (1, 13),
    progress: bool = False,
    where: str = "binding_data",
) -> pd.DataFrame:
    """`n_per_cell` programs for every (n_lines, hops) in the inclusive ranges with hops+1 <= n_lines.

    Errors name the ranges as `{where}.gen_lines` / `{where}.gen_hops`.
    """
    cfg.validate()
    if hops_range[0] < 0 or hops_range[1] + 1 > len(LETTERS):
        raise PipelineError(
            f"{where}.gen_hops: hops must lie in [0, {len(LETTERS) - 1}] (one variable"
            f" per chain link), got {list(hops_range)}"
        )
    cells = [
        (n, h)
        for n in range(lines_range[0], lines_range[1] + 1)
        for h in range(hops_range[0], hops_range[1] + 1)
        if h + 1 <= n
    ]
    if not cells:
        raise PipelineError(
            f"{where}.gen_lines: no cell with hops+1 <= n_lines in lines {list(lines_range)} x hops {list(hops_range)}"
        )
    cfg = dataclasses.replace(cfg, reject=("one_value",))  # an evaluation grid: see stress_table
    r = python_rng(rng)
    bar = tqdm(total=len(cells) * n_per_cell, desc="programs[gen]", disable=not progress)
    programs = []
    for n, h in cells:
        programs += [draw(r, cfg, n, h) for _ in range(n_per_cell)]
        bar.update(n_per_cell)
    bar.close()
    return program_table(programs, "gen")


def heuristic_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per heuristic: the fraction of rows where it guesses the answer (-1 never matches)."""
    return pd.DataFrame(
        {
            "heuristic": list(HEURISTICS),
            "match_rate": [float((df[f"heur_{name}"] == df["answer"]).mean()) for name in HEURISTICS],
            "n": np.int64(len(df)),
        }
    )


@dataclasses.dataclass
class DataParams:
    """The binding_data section: the fixed sets drawn from the generator (binding_programs)."""

    n_programs: Annotated[int, Ge(3)]  # one program at least in each of the three splits
    split: tuple[float, float, float] = (0.9, 0.002, 0.098)
    gen_per_cell: Annotated[int, Ge(0)] = 10
    gen_lines: tuple[int, int] = (2, 25)
    gen_hops: tuple[int, int] = (1, 13)
    stress_per_hop: Annotated[int, Ge(0)] = 200  # stress suite (stress.py): programs per (distribution, hop count)
    seed: int = 0

    def validate(self, where: str) -> None:
        if any(f < 0 for f in self.split) or abs(sum(self.split) - 1.0) > 1e-9:
            raise PipelineError(f"{where}.split: three non-negative fractions summing to 1, got {list(self.split)}")
        if min(split_sizes(self.n_programs, self.split)) < 1:
            raise PipelineError(f"{where}.split: every split needs >= 1 of {self.n_programs} programs")
        if self.gen_hops[0] < 0 or self.gen_hops[1] + 1 > len(LETTERS):
            raise PipelineError(
                f"{where}.gen_hops: hops must lie in [0, {len(LETTERS) - 1}] (one variable per chain link),"
                f" got {list(self.gen_hops)}"
            )
        for key in ("gen_lines", "gen_hops"):
            lo, hi = getattr(self, key)
            if lo > hi:
                raise PipelineError(f"{where}.{key}: range [{lo}, {hi}] is empty")


def split_sizes(n: int, fractions: tuple[float, ...]) -> list[int]:
    """Sizes of consecutive splits; rounding slack goes to the last one."""
    sizes = [int(round(n * f)) for f in fractions[:-1]]
    return sizes + [n - sum(sizes)]


def load_data_params(params: dict) -> tuple[DataParams, ProgramConfig]:
    data = from_dict(DataParams, section(params, "binding_data"), "binding_data")
    return data, load_program_config(params)


def load_program_config(params: dict) -> ProgramConfig:
    return from_dict(ProgramConfig, section(params, "binding_programs"), "binding_programs")
