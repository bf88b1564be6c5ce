"""The paper's program distribution (our reading of it), and programs of a pinned shape.

What our texts give of the paper (../shared/papers, 2505.20896): "500,000
programs with 16 assignment lines (variables assigned either numerical
constants or other variables) plus a final query line. The model must trace
variable chains up to 4 hops deep ... The training distribution uses
chain-length-cubed weighting and rejection sampling to prevent shortcut
solutions." They say no more about how the lines are laid out. Ours:

- hops h with P(h) ~ (h+1)^3 (chain length read as its h+1 lines; `sets.py`);
- the chain's h+1 lines are a uniform random set of the n lines: the
  constant may sit on line 1, links anywhere (`links: any`). The training
  stream may instead draw half its programs with links close together
  (`links: mixed`, a program's layout `any` or `near`, see chain_lines): ours,
  the paper texts say nothing of spacing; why: uniform lines put a 1-hop
  chain's two lines 5.7 apart on average, and a model trained on that alone
  missed close and rewritten links laid out by another generator
  (docs/binding.md);
- the number of distinct variables is uniform over its valid range
  [h+1, min(n, 26)], every one of them written at least once;
- every other line writes a variable allowed there: never a chain variable
  between its write and the line that reads it, never the query after its
  final write (so the query is assigned once or more, as it happens);
- its right-hand side is a digit (with a per-program probability uniform in
  [0.2, 0.8]) or a copy of any variable defined above it but itself:
  distractor chains of any length, branches off the query's own chain
  (values shared between chains), digits shared with the answer;
- rejection: a program that a shortcut named in `binding_programs.reject`
  answers is redrawn; by default only `one_value` (every constant holds the
  answer's digit, so copying any digit answers it).

The heuristics (`heuristics.py`) are left at their natural match rates, which
the data stage reports. A `Shape` pins one property (the stress suites,
`stress.py`); its other properties are drawn as above.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from emergence.core.io import PipelineError
from emergence.studies.binding.heuristics import SHORTCUTS
from emergence.studies.binding.programs import LETTERS, Program, trace

Links = Literal["any", "near", "mixed", "adjacent", "spread", "const_first", "const_last"]
Distractor = Literal["natural", "planted", "twin"]
P_CONST = (0.2, 0.8)  # per-program share of digit right-hand sides among the free lines
MAX_TRIES = 200  # draws of one program before its shape is declared impossible
MIXED: tuple[Links, ...] = ("any", "near")  # layouts a `mixed` program is drawn from, equally often


@dataclass(frozen=True)
class Shape:
    """Structural properties of a program; None = drawn over its full valid range."""

    links: Links = "any"  # where the chain's h+1 lines sit (see chain_lines)
    n_vars: tuple[int, int] | None = None  # distinct variables, inclusive range
    query_writes: tuple[int, int] | None = None  # times the query variable is assigned, inclusive
    # natural: distractor chains only as the copies make them; planted: one more distractor chain of
    # 0..hops copies on random lines (when it fits); twin: one exactly as long as the query's, from
    # another digit, and the answer's digit on a line off both chains
    distractor: Distractor = "natural"


def chain_lines(r: random.Random, n: int, hops: int, links: Links) -> list[int]:
    """Line numbers (0-based, ascending) of the chain: its constant first, the query's line last."""
    k = hops + 1
    if links == "mixed":
        links = r.choice(MIXED)
    if links == "near":  # each link 1 + Geometric(1/2) lines after the last (mean 2), redrawn until it fits
        while True:
            gaps = [1 + _geometric_half(r) for _ in range(hops)]
            if sum(gaps) <= n - 1:
                break
        start = r.randrange(n - sum(gaps))
        return [start + sum(gaps[:i]) for i in range(k)]
    if links == "any":
        return sorted(r.sample(range(n), k))
    if links == "adjacent":
        start = r.randrange(n - hops)
        return list(range(start, start + k))
    if links == "spread":  # as far apart as the program allows, evenly
        gap = (n - 1) // hops if hops else 0
        start = r.randrange(n - gap * hops)
        return [start + i * gap for i in range(k)]
    if links == "const_first":
        return [0, *sorted(r.sample(range(1, n), hops))]
    if links == "const_last":  # the constant as late as it can be: the chain fills the last lines
        return list(range(n - k, n))
    raise PipelineError(f"links: unknown layout {links!r}")


def _geometric_half(r: random.Random) -> int:
    """k >= 0 with P(k) = 2^-(k+1): failures before the first heads of a fair coin."""
    k = 0
    while r.random() < 0.5:
        k += 1
    return k


def _live(chain: list[int], names: list[str], final: bool) -> dict[str, tuple[int, int]]:
    """Per chain variable, the open interval of lines where writing it would break the chain."""
    spans = {names[i]: (chain[i], chain[i + 1]) for i in range(len(chain) - 1)}
    if final:
        spans[names[-1]] = (chain[-1], 1 << 30)  # the query: never written after its final line
    return spans


def _draw(r: random.Random, n: int, hops: int, shape: Shape) -> Program | None:
    """One program of this shape, or None when this draw cannot satisfy it (the caller redraws)."""
    chain = chain_lines(r, n, hops, shape.links)
    free = [i for i in range(n) if i not in set(chain)]
    lo, hi = shape.n_vars or (1, len(LETTERS))
    hi = min(hi, n, len(LETTERS))
    depth = None  # hops of the planted or twin distractor chain
    if shape.distractor == "twin":
        depth = hops
    elif shape.distractor == "planted":
        depth = r.randint(0, hops)
    if depth is not None and (depth + 1 > len(free) or hops + depth + 2 > hi):
        if shape.distractor == "twin":
            return None
        depth = None  # no room for a planted chain in this program
    twin = sorted(r.sample(free, depth + 1)) if depth is not None else []
    need = hops + 1 + len(twin)
    lo = max(lo, need)
    if lo > hi:
        return None
    names = r.sample(LETTERS, r.randint(lo, hi))
    cvars, tvars, others = names[: hops + 1], names[hops + 1 : need], names[need:]
    query, answer = cvars[-1], r.randrange(10)
    live = {**_live(chain, cvars, final=True), **_live(twin, tvars, final=False)}

    lhs: dict[int, str] = {line: var for line, var in zip(chain, cvars)}
    lhs.update(zip(twin, tvars))
    open_lines = [i for i in free if i not in lhs]
    r.shuffle(open_lines)
    if shape.query_writes is not None:  # pin the query's earlier writes before anything else
        before = [i for i in open_lines if i < chain[-1]]
        fewest, most = shape.query_writes[0] - 1, min(shape.query_writes[1] - 1, len(before))
        if fewest < 0 or fewest > most:
            return None
        extra = r.randint(fewest, most)
        lhs.update((i, query) for i in before[:extra])
        open_lines = [i for i in open_lines if i not in lhs]
    if len(others) > len(open_lines):
        return None
    lhs.update(zip(open_lines, others))  # every variable is written at least once
    for i in open_lines[len(others) :]:
        allowed = [
            v
            for v in names
            if not (v in live and live[v][0] < i < live[v][1]) and not (v == query and shape.query_writes is not None)
        ]
        if not allowed:
            return None
        lhs[i] = r.choice(allowed)

    p_const = r.uniform(*P_CONST)
    twin_digit = 0  # the distractor chain's constant: another digit for a twin, any digit when planted
    if shape.distractor == "twin":
        twin_digit = (answer + r.randrange(1, 10)) % 10
    elif twin:
        twin_digit = r.randrange(10)
    answer_line = r.choice(open_lines) if shape.distractor == "twin" and open_lines else None
    lines: list[tuple[str, str]] = []
    defined: list[str] = []
    links = dict(zip(chain[1:], cvars[:-1])) | dict(zip(twin[1:], tvars[:-1]))
    for i in range(n):
        if i == chain[0]:
            rhs = str(answer)
        elif twin and i == twin[0]:
            rhs = str(twin_digit)
        elif i in links:
            rhs = links[i]
        elif i == answer_line:
            rhs = str(answer)
        else:
            sources = [v for v in defined if v != lhs[i]]
            rhs = r.choice(sources) if sources and r.random() >= p_const else str(r.randrange(10))
        lines.append((lhs[i], rhs))
        if lhs[i] not in defined:
            defined.append(lhs[i])
    got, path = trace(lines, query)
    if got != answer or len(path) != hops + 1:
        raise AssertionError(f"generator broke its own chain: {lines} #{query}")
    return Program(tuple(lines), query, answer, hops, path)


def fits(shape: Shape, n: int, hops: int) -> bool:
    """Whether programs of `n` lines, `hops` hops can have this shape at all."""
    chains = 2 if shape.distractor == "twin" else 1
    free_before_query = n - hops - 1  # at most: the chain's lines last
    return (
        chains * (hops + 1) <= n
        and (shape.n_vars is None or shape.n_vars[1] >= chains * (hops + 1))
        and (shape.query_writes is None or shape.query_writes[0] - 1 <= free_before_query)
    )


def sample_shaped(
    r: random.Random, n: int, hops: int, shape: Shape = Shape(), reject: tuple[str, ...] = ("one_value",)
) -> Program:
    """One program of `n` lines whose query is `hops` copies from its constant, of this shape, that
    none of the `reject` shortcuts answers."""
    if not fits(shape, n, hops):
        raise PipelineError(f"programs of {n} lines with {hops} hops cannot have the shape {shape}")
    cramped = n < hops + 2  # every line is a chain line: one constant, no shortcut can be avoided
    for _ in range(MAX_TRIES):
        program = _draw(r, n, hops, shape)
        if program is not None and (cramped or all(SHORTCUTS[name](program) != program.answer for name in reject)):
            return program
    raise PipelineError(f"no program of {n} lines, {hops} hops has shape {shape} ({MAX_TRIES} draws)")
