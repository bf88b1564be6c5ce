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
from typing import Literal

import numpy as np

from emergence.core.io import PipelineError
from emergence.studies.binding.heuristics import SHORTCUTS

LETTERS = string.ascii_lowercase


@dataclass(frozen=True)
class ProgramConfig:
    """The binding_programs section: what a program is. `distribution`: `paper` (paper.py) or `balanced`
    (balanced.py); the p_* knobs, heuristic_target and max_tries steer the balanced one only."""

    distribution: Literal["paper", "balanced"] = "balanced"
    n_lines: int = 16
    min_hops: int = 0
    max_hops: int = 4
    hop_weight_power: float = 3.0  # P(hops) ~ (hops+1)**power
    heuristic_target: float = 0.10  # per-heuristic match rate
    p_const: float = 0.6  # a distractor line is a constant (else a copy)
    p_fresh: float = 0.8  # a distractor writes a fresh variable (else reassigns)
    p_dead: float = 0.9  # ...or overwrites a chain variable already copied onward
    p_chain_copy: float = 0.1  # a distractor copy reads a chain variable
    p_extend: float = 0.5  # ...else the newest distractor variable (a distractor chain)
    max_tries: int = 32  # proposals per program before keeping an off-pattern one
    reject: tuple[str, ...] = ("one_value",)  # paper only: shortcuts whose programs are redrawn
    distractor: Literal["natural", "planted"] = "natural"  # paper only: plant a distractor chain (paper.Shape)
    links: Literal["any", "mixed"] = "any"  # paper only: chain layout, mixed = half `any`, half `near` (paper.py)

    def validate(self, where: str = "binding_programs") -> None:
        if self.n_lines < 1:
            raise PipelineError(f"{where}.n_lines: must be >= 1, got {self.n_lines}")
        if self.min_hops < 0:
            raise PipelineError(f"{where}.min_hops: must be >= 0, got {self.min_hops}")
        if self.min_hops > self.max_hops:
            raise PipelineError(f"{where}.min_hops: {self.min_hops} > max_hops {self.max_hops}")
        if self.max_hops + 1 > self.n_lines:
            raise PipelineError(
                f"{where}.max_hops: a chain of {self.max_hops} hops needs {self.max_hops + 1} lines"
                f" but n_lines is {self.n_lines}"
            )
        if self.max_hops + 1 > len(LETTERS):
            raise PipelineError(
                f"{where}.max_hops: a chain of {self.max_hops} hops needs {self.max_hops + 1}"
                f" distinct variables, only {len(LETTERS)} exist"
            )
        if not 0.0 < self.heuristic_target < 1.0:
            raise PipelineError(f"{where}.heuristic_target: must be in (0, 1), got {self.heuristic_target}")
        for key in ("p_const", "p_fresh", "p_dead", "p_chain_copy", "p_extend"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise PipelineError(f"{where}.{key}: must be in [0, 1], got {getattr(self, key)}")
        if not 0.0 <= self.hop_weight_power <= 20.0:  # NaN fails too; beyond 20 the prior overflows
            raise PipelineError(f"{where}.hop_weight_power: a number in [0, 20], got {self.hop_weight_power}")
        unknown = sorted(set(self.reject) - set(SHORTCUTS))
        if unknown:
            raise PipelineError(f"{where}.reject: unknown shortcut(s) {unknown} (known: {', '.join(SHORTCUTS)})")
        if self.links != "any" and self.distribution != "paper":
            raise PipelineError(
                f"{where}.links: {self.links!r} needs distribution: paper (the balanced one lays out its own)"
            )
        if self.max_tries < 1:
            raise PipelineError(f"{where}.max_tries: must be >= 1, got {self.max_tries}")


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
