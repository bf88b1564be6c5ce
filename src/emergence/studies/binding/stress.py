"""Stress suite: program distributions that each push one property past what training shows.

Each is the paper distribution (`paper.py`) with one property pinned; hops are
uniform over the configured range so every hop class is measured alike. Beside
them, two reference sets drawn the same way with nothing pinned, one per
generator (`ref_paper`, `ref_balanced`), so the report shows both whichever one
trains. The labels come from the interpreter (`sets.program_table`), not from
the generator.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from emergence.core.io import PipelineError
from emergence.studies.binding.balanced import sample_balanced
from emergence.studies.binding.batches import encode_programs, predict_answers
from emergence.studies.binding.paper import Shape, fits, sample_shaped
from emergence.studies.binding.programs import ProgramConfig, python_rng
from emergence.studies.binding.sets import program_table
from emergence.studies.binding.tokenizer import CharTokenizer

STRESS = (
    "links_spread",  # chain links as far apart as the program allows
    "links_adjacent",  # chain links on consecutive lines
    "const_line1",  # the chain's constant on line 1
    "const_late",  # the constant as late as possible (the chain fills the last lines)
    "query_once",  # the query variable assigned only by its chain
    "query_thrice",  # ... and two or more times before
    "many_vars",  # >= 14 distinct variables at 16 lines (7/8 of the lines): little reassignment
    "few_vars",  # <= 5 distinct variables: heavy reassignment
    "twin_chain",  # a distractor chain as long as the query's; the answer digit on another line
)
REFERENCE = ("paper", "balanced")  # each generator with nothing pinned


def stress_shapes(n_lines: int) -> dict[str, Shape]:
    """Each stress distribution's pinned property, for programs of `n_lines` lines."""
    return {
        "links_spread": Shape(links="spread"),
        "links_adjacent": Shape(links="adjacent"),
        "const_line1": Shape(links="const_first"),
        "const_late": Shape(links="const_last"),
        "query_once": Shape(query_writes=(1, 1)),
        "query_thrice": Shape(query_writes=(3, n_lines)),
        "many_vars": Shape(n_vars=(min(14, n_lines - n_lines // 8), 26)),
        "few_vars": Shape(n_vars=(1, 5)),
        "twin_chain": Shape(distractor="twin"),
    }


def stress_table(rng: np.random.Generator, cfg: ProgramConfig, n_per_hop: int, progress: bool = False) -> pd.DataFrame:
    """`n_per_hop` programs of `cfg.n_lines` lines per (set, hop count): the stress sets (`stress_<name>`)
    then the reference sets (`ref_<generator>`). A (set, hop count) that no program of `cfg.n_lines`
    lines can have (a twin chain of 8 hops in 16 lines, <= 5 variables for a 5-hop chain) is left out
    and printed. Only `one_value` is rejected: the sets evaluate, and a pinned shape may force a
    heuristic right (the constant on line 1)."""
    r = python_rng(rng)
    n, hops = cfg.n_lines, range(cfg.min_hops, cfg.max_hops + 1)
    balanced = ProgramConfig(distribution="balanced", n_lines=n, min_hops=cfg.min_hops, max_hops=cfg.max_hops)
    samplers = {f"stress_{name}": (shape, sample_shaped) for name, shape in stress_shapes(n).items()}
    samplers["ref_paper"] = (Shape(), sample_shaped)
    samplers["ref_balanced"] = (Shape(), lambda r, n, h, _: sample_balanced(r, balanced, n, h))
    bar = tqdm(total=len(samplers) * len(hops) * n_per_hop, desc="programs[stress]", disable=not progress)
    tables = []
    for name, (shape, sample) in samplers.items():
        programs, label = [], name.removeprefix("stress_")
        for h in hops:
            if not fits(shape, n, h):
                print(f"stress set {label}: no program of {n} lines has {h} hops and this shape; left out")
                continue
            try:
                programs += [sample(r, n, h, shape) for _ in range(n_per_hop)]
            except PipelineError as e:
                raise PipelineError(f"binding_programs: stress set {label}: {e}") from e
            bar.update(n_per_hop)
        tables.append(program_table(programs, name))
    bar.close()
    return pd.concat(tables, ignore_index=True)


def curve_steps(steps: list[int], named: int, every: int) -> list[int]:
    """The checkpoints binding_stress scores: the named one, and each multiple of `every` (if > 0)."""
    return sorted({named, *(s for s in steps if every > 0 and s % every == 0)})


def stress_accuracy(model: torch.nn.Module, programs: pd.DataFrame, seed: int, step: int) -> pd.DataFrame:
    """Accuracy per (set, n_lines, hops) of `programs` (stress sets and the generalisation grid):
    one row each with seed, step, set, n_lines, hops, n, correct, accuracy."""
    tok = CharTokenizer()
    data = encode_programs(programs["program"], programs["answer"], tok)
    correct = predict_answers(model, data, tok) == programs["answer"].to_numpy()
    scored = programs[["set", "n_lines", "hops"]].assign(correct=correct.astype(np.int64))
    table = scored.groupby(["set", "n_lines", "hops"], sort=True).agg(n=("correct", "size"), correct=("correct", "sum"))
    table = table.reset_index().assign(seed=seed, step=step)
    table["accuracy"] = table["correct"] / table["n"]
    return table[["seed", "step", "set", "n_lines", "hops", "n", "correct", "accuracy"]]
