"""Synthetic variable-binding programs (Wu, Geiger & Milliere, arXiv 2505.20896).

A program is N assignment lines `x=5` / `x=y` with Python semantics, then a
query `#x:`; the target is x's final value. The value reaches the query
through a chain of copies (`hops` of them) from one constant line; the other
lines are distractors: constants, copies, reassignments and copies of chain
variables, interleaved with the chain.

Shortcut control. Five cheap heuristics (binding_heuristics.HEURISTICS) must
match the answer only at chance. Rather than filtering a natural proposal
(whose heuristics are strongly correlated, so ratio rejection would keep ~3%),
each program first draws its target match pattern -- one independent
Bernoulli(heuristic_target) per heuristic -- together with its hop count and a
uniform answer; it then builds proposals steered towards that pattern and keeps
the first whose realised pattern equals it. Hops, answer and pattern marginals
are therefore exact, and the heuristics are mutually independent.

Not controlled: structural cues outside the five heuristics. On the default
training distribution "the 2nd constant" matches ~37%, "the constant nearest
above the query's last assignment" ~34% and "the final value of the last copy
line's variable" ~36% (chance 10%): one chain among ~16 lines leaves them.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import string
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm import tqdm

from emergence.core.config import from_dict, section
from emergence.core.io import PipelineError
from emergence.studies.binding.heuristics import HEURISTICS, evaluate, match_pattern

__all__ = [
    "HEURISTICS",
    "Program",
    "ProgramConfig",
    "evaluate",
    "generalisation_table",
    "generate_table",
    "heuristic_table",
    "sample_program",
    "trace",
]

LETTERS = string.ascii_lowercase


@dataclass(frozen=True)
class ProgramConfig:
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

    def validate(self, where: str = "binding_data") -> None:
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


def _pick(r: random.Random, seq):
    return seq[int(r.random() * len(seq))]


def _take(r: random.Random, pool: list):
    """Remove and return a random element: lazy sampling without replacement."""
    return pool.pop(int(r.random() * len(pool)))


def _other_digit(r: random.Random, answer: int) -> int:
    return (answer + 1 + int(r.random() * 9)) % 10


def _layout(r: random.Random, n: int, hops: int) -> tuple[list[int], int, int]:
    """Chain line positions, a distractor constant line after the chain's constant (-1 if
    none fits), and the line pre-assigning the query (-1 if none fits).

    With room, line 0 is a distractor constant, and the chain's last line and then its
    constant line are placed uniformly (a random subset would put the constant early and
    the query's line late, so "the 2nd constant" or "the last copy" would be shortcuts).
    """
    if n < hops + 3:
        rows = list(range(n))
        chain = sorted(_take(r, rows) for _ in range(hops + 1))
    else:
        end = hops + 1 + int(r.random() * (n - hops - 1))
        start = 1 + int(r.random() * (end - hops))
        rows = list(range(start + 1, end))
        chain = sorted([start, end] + [_take(r, rows) for _ in range(hops - 1)]) if hops else [end]
    taken = set(chain)
    after = _pick(r, [i for i in range(chain[0] + 1, n) if i not in taken] or [-1])
    before_query = [i for i in range(chain[-1]) if i not in taken and i != after]
    qpre = _pick(r, [i for i in before_query if i] or before_query or [-1])
    return chain, after, qpre


def _structure(r: random.Random, cfg: ProgramConfig, n: int, hops: int, answer: int):
    """Lines as [lhs, rhs] with distractor constants left as None, plus each variable's
    source: the constant line its final value comes from."""
    chain, after, qpre = _layout(r, n, hops)
    pool = list(LETTERS)
    cvars = [_take(r, pool) for _ in range(hops + 1)]
    query = cvars[-1]
    dead: list[str] = []  # chain variables already copied onward: free to overwrite
    src: dict[str, int] = {}  # insertion-ordered, so picks from it are reproducible
    lines: list[list] = []
    k = 0  # chain lines emitted so far
    for i in range(n):
        if k <= hops and i == chain[k]:
            lhs, rhs = cvars[k], (str(answer) if k == 0 else cvars[k - 1])
            if k:
                dead.append(cvars[k - 1])
            k += 1
        else:
            lhs = _distractor_lhs(r, cfg, i == qpre, query, cvars[k - 1] if k else None, cvars[k:hops], dead, src, pool)
            copy = i not in (after, qpre) and r.random() >= cfg.p_const
            rhs = _copy_source(r, cfg, lhs, src, cvars) if copy else None
        line_src = src[rhs] if rhs and not rhs.isdigit() else i
        src.pop(lhs, None)  # re-insert: dict order is most-recently-written last
        src[lhs] = line_src
        lines.append([lhs, rhs])
    return lines, query, chain, qpre, src


def _distractor_lhs(
    r: random.Random,
    cfg: ProgramConfig,
    pre_query: bool,
    query: str,
    live: str | None,
    pending: list[str],
    dead: list[str],
    defined: dict,
    pool: list[str],
) -> str:
    """Variable a distractor line writes; never the live chain variable nor the query."""
    if pre_query:
        return query
    if dead and r.random() < cfg.p_dead:
        return _take(r, dead)
    reuse = [v for v in defined if v != live and v != query]
    if reuse and (not pool or r.random() >= cfg.p_fresh):
        return _pick(r, reuse)
    # A fresh name: sometimes a chain variable ahead of its chain line.
    unused = [v for v in pending if v not in defined] + [None]
    return _pick(r, unused) or _take(r, pool)


def _copy_source(r: random.Random, cfg: ProgramConfig, lhs: str, defined: dict, cvars: list[str]) -> str | None:
    """A defined variable to copy, mostly a distractor one; None if there is none."""
    chained = [v for v in cvars if v in defined and v != lhs]
    other = [v for v in defined if v not in cvars and v != lhs]
    if chained and (not other or r.random() < cfg.p_chain_copy):
        return _pick(r, chained)
    if other and r.random() < cfg.p_extend:
        return other[-1]  # extend the newest distractor chain
    return _pick(r, other) if other else None


def _assign_digits(r: random.Random, lines, src: dict[str, int], qpre: int, answer: int, target: int) -> None:
    """Fill the distractor constants: uniform digits, then the fewest changes that steer the
    heuristics towards the `target` bits (the caller checks with the real heuristics)."""
    bit = [bool(target >> i & 1) for i in range(len(HEURISTICS))]
    free = {i for i, (_, rhs) in enumerate(lines) if rhs is None}
    digit = {
        i: int(r.random() * 10) if rhs is None else int(rhs)
        for i, (_, rhs) in enumerate(lines)
        if rhs is None or rhs.isdigit()
    }
    # Heuristics reading one line: last constant, first constant, query's first assignment.
    for line, want in ((max(digit), bit[0]), (min(digit), bit[1]), (qpre, bit[3])):
        if line in free:
            digit[line] = answer if want else _other_digit(r, answer)
            free.discard(line)
    # Frequency heuristics: recolour free lines to the answer, or to one decoy digit, until
    # the mode is right -- heavy lines (many final holders) for values, light ones for counts.
    weight = Counter(src.values())
    counts, values = [0] * 10, [0] * 10
    for i, d in digit.items():
        counts[d] += 1
        values[d] += weight[i]
    decoy = _other_digit(r, answer)
    order = sorted(free, key=lambda i: (weight[i], r.random()))
    for want, total, candidates in ((bit[4], values, order[::-1]), (bit[2], counts, order)) * 2:
        colour = answer if want else decoy
        for i in candidates:
            if (total.index(max(total)) == answer) == want:  # index(max): ties -> smallest
                break
            if i in free and digit[i] != colour:
                counts[digit[i]] -= 1
                values[digit[i]] -= weight[i]
                digit[i] = colour
                counts[colour] += 1
                values[colour] += weight[i]
                free.discard(i)
    for i in digit:
        lines[i][1] = str(digit[i])


def _propose(r: random.Random, cfg: ProgramConfig, n: int, hops: int, answer: int, target: int) -> Program:
    lines, query, chain, qpre, src = _structure(r, cfg, n, hops, answer)
    _assign_digits(r, lines, src, qpre, answer, target)
    return Program(tuple(map(tuple, lines)), query, answer, hops, tuple(reversed(chain)))


def _hop_prior(cfg: ProgramConfig) -> tuple[list[int], list[float]]:
    """Hop values and cumulative weights, P(hops) ~ (hops+1)**hop_weight_power."""
    hops = list(range(cfg.min_hops, cfg.max_hops + 1))
    return hops, list(itertools.accumulate((h + 1) ** cfg.hop_weight_power for h in hops))


def _sample(r: random.Random, cfg: ProgramConfig, n: int, hops: int) -> Program:
    answer = int(r.random() * 10)
    target = sum(1 << i for i in range(len(HEURISTICS)) if r.random() < cfg.heuristic_target)
    for _ in range(cfg.max_tries):
        prog = _propose(r, cfg, n, hops, answer, target)
        if match_pattern(prog, answer) == target:
            break
    return prog  # after max_tries (only in cramped programs) the pattern is off-target


def _python_rng(rng: np.random.Generator) -> random.Random:
    """The stdlib generator seeded from `rng`: per-value numpy calls would dominate the cost."""
    return random.Random(int(rng.integers(2**63)))


def sample_program(
    rng: np.random.Generator, cfg: ProgramConfig, n_lines: int | None = None, hops: int | None = None
) -> Program:
    """One program; hops drawn from the cube-weighted prior unless given."""
    r = _python_rng(rng)
    if hops is None:
        values, cum = _hop_prior(cfg)
        hops = r.choices(values, cum_weights=cum)[0]
    return _sample(r, cfg, cfg.n_lines if n_lines is None else n_lines, hops)


def _table(programs: list[Program], set_name: str) -> pd.DataFrame:
    df = pd.DataFrame(
        {
            "program": [p.text for p in programs],
            "query": [p.query for p in programs],
            "answer": np.array([p.answer for p in programs], dtype=np.int64),
            "hops": np.array([p.hops for p in programs], dtype=np.int64),
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
    """`n` training-distribution programs, one row each (see `_table` for the columns)."""
    cfg.validate()
    r = _python_rng(rng)
    values, cum = _hop_prior(cfg)
    programs = [
        _sample(r, cfg, cfg.n_lines, r.choices(values, cum_weights=cum)[0])
        for _ in tqdm(range(n), desc=f"programs[{set_name}]", disable=not progress)
    ]
    return _table(programs, set_name)


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
    cfg.validate(where)
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
    r = _python_rng(rng)
    bar = tqdm(total=len(cells) * n_per_cell, desc="programs[gen]", disable=not progress)
    programs = []
    for n, h in cells:
        programs += [_sample(r, cfg, n, h) for _ in range(n_per_cell)]
        bar.update(n_per_cell)
    bar.close()
    return _table(programs, "gen")


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
