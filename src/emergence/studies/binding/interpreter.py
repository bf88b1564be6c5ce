"""A second, independent reading of a program's text: its answer and its hop count.

The generators know what they built (`programs.trace` walks back from the
query through the lines they made). The labels of every evaluation set come
from here instead: the program's *text* is parsed and run forwards, line by
line, as Python would run it, keeping for each variable its value and how
many copies its value went through since its constant. Nothing is shared with
the generators, so a generator bug (a chain broken by a later write, a query
pointing at the wrong line) shows up as a disagreement, not as a label.
"""

from __future__ import annotations

import re

from emergence.core.io import PipelineError

ASSIGNMENT = re.compile(r"([a-z])=([a-z]|[0-9])")
QUERY = re.compile(r"#([a-z]):")


def run_program(text: str) -> tuple[int, int]:
    """(answer, hops) of `a=5\\nb=a\\n#b:`: the query's final value, and the number of copies
    between that value's constant and the query (0 when the query holds a constant)."""
    *body, last = text.split("\n")
    query = QUERY.fullmatch(last)
    if query is None:
        raise PipelineError(f"last line {last!r}: expected a query like '#x:'")
    memory: dict[str, tuple[int, int]] = {}  # variable -> (value, copies since its constant)
    for number, line in enumerate(body, start=1):
        match = ASSIGNMENT.fullmatch(line)
        if match is None:
            raise PipelineError(f"line {number} {line!r}: expected an assignment like 'x=5' or 'x=y'")
        target, source = match.groups()
        if source.isdigit():
            memory[target] = (int(source), 0)
        elif source in memory:
            value, copies = memory[source]
            memory[target] = (value, copies + 1)
        else:
            raise PipelineError(f"line {number} {line!r}: reads '{source}' before it is assigned")
    if query.group(1) not in memory:
        raise PipelineError(f"query {last!r}: '{query.group(1)}' is never assigned")
    return memory[query.group(1)]
