"""The mutation score per module, from a finished `mutmut run` (mutants/**/*.py.meta), as the table of
docs/testing.md:

    python tests/mutation_table.py [--write docs/testing.md]

Killed: a test failed (or timed out) with the mutant in place. Survived: every test that reaches the
mutated function passed; "no tests": no unit test reaches it, which counts as survived. A mutant listed
in tests/mutation_equivalent.tsv (mutant name, one-line reason) computes the same function as the
original and is left out of the score; the table lists each with its reason. Score = killed / (all -
equivalent); target >= 85 % per module.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "tests" / "mutation_equivalent.tsv"
BEGIN, END = "<!-- mutation table: begin -->", "<!-- mutation table: end -->"
TARGET = 0.85
KILLED = {1, 3, 36, 24, -24, 152, 255}  # a test failed, pytest errored, or the mutant timed out (mutmut's codes)


def equivalents(path: Path = EQUIVALENT) -> dict[str, str]:
    """mutant name -> reason, from a TSV with a header line; every row needs a reason."""
    if not path.exists():
        return {}
    found = {}
    for n, line in enumerate(path.read_text().splitlines()[1:], start=2):
        if not line.strip():
            continue
        name, _, reason = line.partition("\t")
        if not reason.strip():
            raise SystemExit(f"{path}:{n}: {name}: an equivalent mutant needs a one-line reason")
        found[name.strip()] = reason.strip()
    return found


def tally(mutants: Path, equivalent: dict[str, str]) -> dict[str, Counter]:
    """Per source file (relative to the checkout): counts of killed, survived, no tests, equivalent, unchecked."""
    rows: dict[str, Counter] = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        if not codes:
            continue
        count = Counter()
        for name, code in codes.items():
            if name in equivalent:
                count["equivalent"] += 1
            elif code is None:
                count["unchecked"] += 1
            elif code in KILLED:
                count["killed"] += 1
            elif code in (5, 33):
                count["no tests"] += 1
            else:
                count["survived"] += 1
        rows[str(meta.relative_to(mutants)).removesuffix(".meta")] = count
    return rows


def survivors(mutants: Path, equivalent: dict[str, str]) -> Counter:
    """Checked mutants that no test kills and no reason calls equivalent, counted per function
    (`module.x_function`): what is left to kill or to judge."""
    left = Counter()
    for meta in mutants.rglob("*.py.meta"):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            if code is not None and code not in KILLED and name not in equivalent:
                left[name.rsplit("__mutmut_", 1)[0]] += 1
    return left


def score(count: Counter) -> float | None:
    scored = count["killed"] + count["survived"] + count["no tests"]
    return count["killed"] / scored if scored else None


def table(rows: dict[str, Counter], equivalent: dict[str, str], when: str, left: Counter | None = None) -> str:
    lines = [
        f"Measured {when} with `make mutation` (mutmut {mutmut_version()}; unit suite, `-m 'not pipeline'`).",
        "",
        "| module | mutants | killed | survived | no tests | equivalent | not checked | score |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    total = Counter()
    for path, c in rows.items():
        total.update(c)
        s = score(c)
        flag = "" if s is None or s >= TARGET else " (below 85 %)"
        lines.append(
            f"| `{path}` | {sum(c.values())} | {c['killed']} | {c['survived']} | {c['no tests']} | "
            f"{c['equivalent']} | {c['unchecked']} | {'-' if s is None else f'{100 * s:.1f} %'}{flag} |"
        )
    s = score(total)
    lines.append(
        f"| **all** | {sum(total.values())} | {total['killed']} | {total['survived']} | {total['no tests']} | "
        f"{total['equivalent']} | {total['unchecked']} | {'-' if s is None else f'{100 * s:.1f} %'} |"
    )
    if total["unchecked"]:
        lines += [
            "",
            f"{total['unchecked']} mutants were not checked (the run was stopped before them): the scores "
            "are over the checked ones only.",
        ]
    if left:
        lines += ["", "Surviving mutants per function, still to kill or to judge (`mutmut results` names each, "
                  "`mutmut show NAME` shows its change):", ""]  # fmt: skip
        lines += [f"- `{function}`: {n}" for function, n in sorted(left.items())]
    if equivalent:
        lines += ["", "Equivalent mutants (same function as the original), left out of the score:", ""]
        lines += [f"- `{name}`: {reason}" for name, reason in sorted(equivalent.items())]
    return "\n".join(lines)


def mutmut_version() -> str:
    from importlib.metadata import version

    return version("mutmut")


def write_into(doc: Path, text: str) -> None:
    """Replace what lies between the two table markers of `doc`."""
    body = doc.read_text()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(body):
        raise SystemExit(f"{doc}: no '{BEGIN}' ... '{END}' markers to write the table between")
    doc.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}\n{END}", body))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=ROOT / "mutants", help="mutmut's folder (default: %(default)s)")
    parser.add_argument("--write", type=Path, help="write the table into this document, between its markers")
    args = parser.parse_args(argv)
    equivalent = equivalents()
    rows = tally(args.mutants, equivalent)
    if not rows:
        print(f"{args.mutants}: no mutation results; run `make mutation` first", file=sys.stderr)
        return 1
    text = table(
        rows, equivalent, datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), survivors(args.mutants, equivalent)
    )
    print(text)
    if args.write:
        write_into(args.write, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
