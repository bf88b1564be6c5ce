"""Variable-binding programs (Wu, Geiger & Milliere, arXiv 2505.20896): the data model.

A program is N assignment lines `x=5` / `x=y` with Python semantics, then a
query `#x:`; the target is x's final value. The value reaches the query
through a chain of copies (`hops` of them) from one constant line; the other
lines are distractors. Two generators build them, chosen by
`binding_programs.distribution`: `paper.py` (the paper's distribution, our
reading) and `balanced.py` (every listed heuristic forced to chance); `sets.py`
turns them into the tables the stages read.
"""

from __future__ import annotations

import itertools
import random
import string
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from annotated_types import Ge, Gt, Le, Lt

from emergence.core.io import PipelineError
from emergence.core.rules import field_problems
from emergence.studies.binding.heuristics import SHORTCUTS

LETTERS = string.ascii_lowercase
Probability = Annotated[float, Ge(0), Le(1)]
HopWeightPower = Annotated[float, Ge(0), Le(20)]  # P(hops) ~ (hops+1)**power; beyond 20 the prior overflows
Distractor = Literal["natural", "planted"]
Links = Literal["any", "mixed"]


@dataclass(frozen=True)
class ProgramConfig:
    """The binding_programs section: what a program is. `distribution`: `paper` (paper.py) or `balanced`
    (balanced.py); the p_* knobs, heuristic_target and max_tries steer the balanced one only."""

    distribution: Literal["paper", "balanced"] = "balanced"
    n_lines: Annotated[int, Ge(1)] = 16
    min_hops: Annotated[int, Ge(0)] = 0
    max_hops: Annotated[int, Le(len(LETTERS) - 1)] = 4  # a chain of h hops needs h + 1 distinct variables
    hop_weight_power: HopWeightPower = 3.0
    heuristic_target: Annotated[float, Gt(0), Lt(1)] = 0.10  # per-heuristic match rate
    p_const: Probability = 0.6  # a distractor line is a constant (else a copy)
    p_fresh: Probability = 0.8  # a distractor writes a fresh variable (else reassigns)
    p_dead: Probability = 0.9  # ...or overwrites a chain variable already copied onward
    p_chain_copy: Probability = 0.1  # a distractor copy reads a chain variable
    p_extend: Probability = 0.5  # ...else the newest distractor variable (a distractor chain)
    max_tries: Annotated[int, Ge(1)] = 32  # proposals per program before keeping an off-pattern one
    reject: tuple[str, ...] = ("one_value",)  # paper only: shortcuts whose programs are redrawn
    distractor: Distractor = "natural"  # paper only: plant a distractor chain (paper.Shape)
    links: Links = "any"  # paper only: chain layout, mixed = half `any`, half `near` (paper.py)

    def validate(self, where: str = "binding_programs") -> None:
        """The bounds declared above (the generators check a config built in code here, one from params is
        also checked when it is loaded), then the rules a bound cannot say."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))
        if self.min_hops > self.max_hops:
            raise PipelineError(f"{where}.min_hops: {self.min_hops} > max_hops {self.max_hops}")
        if self.max_hops + 1 > self.n_lines:
            raise PipelineError(
                f"{where}.max_hops: a chain of {self.max_hops} hops needs {self.max_hops + 1} lines"
                f" but n_lines is {self.n_lines}"
            )
        unknown = sorted(set(self.reject) - set(SHORTCUTS))
        if unknown:
            raise PipelineError(f"{where}.reject: unknown shortcut(s) {unknown} (known: {', '.join(SHORTCUTS)})")
        if self.links != "any" and self.distribution != "paper":
            raise PipelineError(
                f"{where}.links: {self.links!r} needs distribution: paper (the balanced one lays out its own)"
            )


@dataclass(frozen=True)
class Program:
    lines: tuple[tuple[str, str], ...]  # (lhs, rhs); rhs is a digit char or a variable
    query: str
    answer: int
    hops: int
    chain_lines: tuple[int, ...]  # query's effective line back to the constant line

    @property
    def text(self) -> str:
        return "\n".join(f"{lhs}={rhs}" for lhs, rhs in self.lines) + f"\n#{self.query}:"


def trace(lines, query: str) -> tuple[int, tuple[int, ...]]:
    """(answer, chain_lines): follow `query` back through copies to its constant."""
    var, end, chain = query, len(lines), []
    while True:
        i = next((j for j in range(end - 1, -1, -1) if lines[j][0] == var), None)
        if i is None:
            raise PipelineError(f"variable '{var}' is read before any assignment (line {end})")
        chain.append(i)
        rhs = lines[i][1]
        if rhs.isdigit():
            return int(rhs), tuple(chain)
        var, end = rhs, i


def hop_prior(cfg: ProgramConfig) -> tuple[list[int], list[float]]:
    """Hop values and cumulative weights, P(hops) ~ (hops+1)**hop_weight_power."""
    hops = list(range(cfg.min_hops, cfg.max_hops + 1))
    return hops, list(itertools.accumulate((h + 1) ** cfg.hop_weight_power for h in hops))


def python_rng(rng: np.random.Generator) -> random.Random:
    """The stdlib generator seeded from `rng`: per-value numpy calls would dominate the cost."""
    return random.Random(int(rng.integers(2**63)))
