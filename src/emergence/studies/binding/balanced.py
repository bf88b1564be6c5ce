"""The balanced generator: every listed heuristic matches the answer at chance.

Shortcut control. Five cheap heuristics (heuristics.CONTROLLED) must
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

import random
from collections import Counter

from emergence.studies.binding.heuristics import CONTROLLED, match_pattern
from emergence.studies.binding.programs import LETTERS, Program, ProgramConfig


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
    bit = [bool(target >> i & 1) for i in range(len(CONTROLLED))]
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


def sample_balanced(r: random.Random, cfg: ProgramConfig, n: int, hops: int) -> Program:
    answer = int(r.random() * 10)
    target = sum(1 << i for i in range(len(CONTROLLED)) if r.random() < cfg.heuristic_target)
    for _ in range(cfg.max_tries):
        prog = _propose(r, cfg, n, hops, answer, target)
        if match_pattern(prog, answer) == target:
            break
    return prog  # after max_tries (only in cramped programs) the pattern is off-target
