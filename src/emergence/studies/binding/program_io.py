"""The programs artifact: its schema, and the subsets the stages read."""

from __future__ import annotations

import os

import pandas as pd

from emergence.core.io import PipelineError, read_parquet
from emergence.studies.binding.heuristics import HEURISTICS

PROGRAM_COLUMNS = {
    "program": "OU",
    "query": "OU",
    "answer": "i",
    "hops": "i",
    "chain_lines": "O",
    "n_lines": "i",
    "split": "OU",
    "set": "OU",
    **{f"heur_{name}": "i" for name in HEURISTICS},
}


def load_programs(path: str | os.PathLike) -> pd.DataFrame:
    """programs.parquet with its schema checked; `program_id` = row number."""
    df = read_parquet(path, PROGRAM_COLUMNS)
    if df.empty:
        raise PipelineError(f"{path}: no programs")
    return df.assign(program_id=range(len(df)))


def subset(df: pd.DataFrame, split: str, set_name: str = "main", n: int | None = None, key: str = "n") -> pd.DataFrame:
    """Programs of one split of one set, the first `n` of them (the table is already shuffled). Fewer
    than `n` is refused, naming the params `key` that asked for them: a score on the 20 programs that
    exist, reported as one on 5,000, would mislead."""
    rows = df[(df["split"] == split) & (df["set"] == set_name)]
    if rows.empty:
        raise PipelineError(f"programs: no {split!r} programs in set {set_name!r} (binding_data.split gives it none?)")
    if n is not None and n > len(rows):
        raise PipelineError(
            f"{key}: {n} is more than the {len(rows)} {split!r} programs of set {set_name!r}; at most {len(rows)}"
        )
    return rows if n is None else rows.head(n)
