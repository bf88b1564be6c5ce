"""The mutation score per module, from a finished `mutmut run` (mutants/**/*.py.meta), as the table of
docs/testing.md:

    python tests/mutation_table.py [--write docs/testing.md]
    python tests/mutation_table.py --key NAME...   # the key of mutmut's mutant NAME, to list it as equivalent

Killed: a test failed (or timed out) with the mutant in place. Survived: every test that reaches the
mutated function passed; "no tests": no unit test reaches it, which counts as survived. A mutant listed
in tests/mutation_equivalent.tsv computes the same function as the original and is left out of the
score; the table lists each with its reason. Score = killed / (all - equivalent); target >= 90 % per
module.

An equivalent mutant is keyed by what it changes, not by mutmut's number (`x_f__mutmut_18`), which shifts
whenever the function gains or loses a mutant above it: the module-qualified function (`pkg.mod.f`,
`pkg.mod.Class.method`), the original line and the mutated line, each whitespace-normalised, and which
occurrence of that original line in the function it is (1 unless the function holds the same line twice).
A mutant that changes several lines (an argument on a line of its own dropped from a call) joins them
with " ⏎ "; a line dropped whole leaves the mutated field empty. A key outlives edits elsewhere in the
function; when its own line changes it names no mutant any more, and the table lists it as stale.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "tests" / "mutation_equivalent.tsv"
BEGIN, END = "<!-- mutation table: begin -->", "<!-- mutation table: end -->"
TARGET = 0.90
KILLED = {1, 3, 36, 24, -24, 152, 255}  # a test failed, pytest errored, or the mutant timed out (mutmut's codes)


HEADER = "function\toccurrence\tline\tmutated\treason"
JOIN = " ⏎ "  # between the lines of a mutant that changes several
CLASS = "ǁ"  # mutmut 3's separator in a method's mangled name: xǁClassǁmethod


class Key(NamedTuple):
    """What an equivalent mutant changes, stable across edits elsewhere in its function."""

    function: str  # module-qualified: pkg.mod.f or pkg.mod.Class.method
    occurrence: int  # which of the function's lines equal to `line` it changes, from 1
    line: str  # the original line(s), whitespace-normalised, joined by JOIN
    mutated: str  # what the mutant has in their place ("" when it drops them)


def normalise(line: str) -> str:
    return " ".join(line.split())


def qualified(name: str) -> str:
    """mutmut's mutant name (`pkg.mod.x_f__mutmut_3`, `pkg.mod.xǁCǁm__mutmut_3`) -> `pkg.mod.f` / `pkg.mod.C.m`."""
    module, _, mangled = name.partition("__mutmut_")[0].rpartition(".")
    if mangled.startswith("x" + CLASS):
        return f"{module}.{'.'.join(mangled.split(CLASS)[1:])}"
    return f"{module}.{mangled.removeprefix('x_')}"


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        for f in node.body if isinstance(node, ast.ClassDef) else [node]:
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
                found[f.name] = f
    return found


def _body(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef, plain: str) -> list[str]:
    """The function's normalised lines, decorators included, named `plain` on its def line."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    body = lines[first - 1 : node.end_lineno]
    body[node.lineno - first] = body[node.lineno - first].replace(node.name, plain, 1)
    return [normalise(line) for line in body]


def mutant_keys(mutated_source: str, names: Iterable[str]) -> dict[str, Key]:
    """The key of each named mutant (mutmut's full names), read from mutmut's mutated copy of its file,
    which holds each function's original as `x_f__mutmut_orig` beside its mutants `x_f__mutmut_N`."""
    lines = mutated_source.splitlines()
    functions = _functions(ast.parse(mutated_source))
    keys = {}
    for name in names:
        generated = name.rpartition(".")[2]
        mangled = generated.partition("__mutmut_")[0]
        function = qualified(name)
        plain = function.rpartition(".")[2]
        original = _body(lines, functions[f"{mangled}__mutmut_orig"], plain)
        mutant = _body(lines, functions[generated], plain)
        hunks = [
            h for h in difflib.SequenceMatcher(None, original, mutant, autojunk=False).get_opcodes() if h[0] != "equal"
        ]
        removed = [line for _, i1, i2, _, _ in hunks for line in original[i1:i2]]
        added = [line for _, _, _, j1, j2 in hunks for line in mutant[j1:j2]]
        start = hunks[0][1] if hunks else 0
        occurrence = 1 + sum(original[i : i + len(removed)] == removed for i in range(start)) if removed else 1
        keys[name] = Key(function, occurrence, JOIN.join(removed), JOIN.join(added))
    return keys


def equivalents(path: Path = EQUIVALENT) -> dict[Key, str]:
    """Key -> reason, from a TSV with HEADER; every row needs a reason and its own key."""
    if not path.exists():
        return {}
    text = path.read_text().splitlines()
    if not text or text[0] != HEADER:
        raise SystemExit(f"{path}:1: header must be {HEADER!r}")
    found: dict[Key, str] = {}
    for n, line in enumerate(text[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 5:
            raise SystemExit(f"{path}:{n}: expected 5 tab-separated fields ({HEADER}), found {len(fields)}")
        function, occurrence, original, mutated, reason = fields
        if not occurrence.isdigit() or int(occurrence) < 1:
            raise SystemExit(f"{path}:{n}: {function}: occurrence must be a whole number >= 1, got {occurrence!r}")
        key = Key(function, int(occurrence), original, mutated)
        if not re.fullmatch(r"\w+(\.\w+)+", function) or not original or original == mutated:
            raise SystemExit(f"{path}:{n}: {function}: not a key (function pkg.mod.f, a line, what the mutant has)")
        if any(part != normalise(part) for field in (original, mutated) if field for part in field.split(JOIN)):
            raise SystemExit(f"{path}:{n}: {function}: lines must be whitespace-normalised")
        if not reason.strip():
            raise SystemExit(f"{path}:{n}: {function}: an equivalent mutant needs a one-line reason")
        if key in found:
            raise SystemExit(f"{path}:{n}: {function}: the same key as an earlier row")
        found[key] = reason.strip()
    return found


def _meta_codes(meta: Path) -> dict[str, int | None]:
    """Each current mutant of the meta's file and its verdict. A file the last run mutated is as mutmut left
    it; one it did not (a scoped run, verdicts restored from the ledger) is mutated again here from its copy
    in mutants/ (the checkout's source): a verdict holds while its function hashes the same, as in mutmut,
    and a mutant of a changed or new function is unchecked."""
    data = json.loads(meta.read_text())
    codes, copy = data["exit_code_by_key"], meta.with_suffix("")
    kept = data.get("hash_by_function_name")
    if not codes or not kept or not copy.is_file() or "__mutmut_orig" in (text := copy.read_text()):
        return codes
    from mutmut.mutation.file_mutation import mutate_file_contents

    module = next(iter(codes)).rpartition(".")[0]
    now = mutate_file_contents(str(copy), text)
    return {
        f"{module}.{name}": codes.get(f"{module}.{name}") if kept.get(function) == digest else None
        for name in now.mutant_names
        for function in [name.partition("__mutmut_")[0]]
        for digest in [now.hash_by_function_name.get(function)]
    }


def equivalent_names(meta: Path, codes: dict[str, int | None], equivalent: dict[Key, str]) -> dict[str, Key]:
    """The mutants of this meta's file that the TSV lists, with their keys. The mutated copy of the file
    lies beside its meta; only the functions the TSV names are read."""
    listed = {key.function for key in equivalent}
    names = [name for name in codes if qualified(name) in listed]
    if not names:
        return {}
    source = meta.with_suffix("")
    if not source.is_file():
        raise SystemExit(f"{meta}: no mutated copy {source} beside it to read the equivalent mutants from")
    text = source.read_text()
    if "__mutmut_orig" not in text:  # a file the last (scoped) run did not mutate: mutmut's mutants of it again
        from mutmut.mutation.file_mutation import mutate_file_contents

        text = mutate_file_contents(str(source), text).code
    return {name: key for name, key in mutant_keys(text, names).items() if key in equivalent}


def stale(mutants: Path, equivalent: dict[Key, str]) -> list[Key]:
    """Listed keys that name no mutant of the last run: their line changed (or their function went), so the
    mutant on the new line is run and judged again."""
    seen: set[Key] = set()
    for meta in mutants.rglob("*.py.meta"):
        seen.update(equivalent_names(meta, _meta_codes(meta), equivalent).values())
    return sorted(set(equivalent) - seen)


def tally(mutants: Path, equivalent: dict[Key, str]) -> dict[str, Counter]:
    """Per source file (relative to the checkout): counts of killed, survived, no tests, equivalent, unchecked."""
    rows: dict[str, Counter] = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        codes = _meta_codes(meta)
        if not codes:
            continue
        listed = equivalent_names(meta, codes, equivalent)
        count = Counter()
        for name, code in codes.items():
            if name in listed:
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


def survivors(mutants: Path, equivalent: dict[Key, str]) -> Counter:
    """Checked mutants that no test kills and no reason calls equivalent, counted per function
    (`module.x_function`): what is left to kill or to judge."""
    left = Counter()
    for meta in mutants.rglob("*.py.meta"):
        codes = _meta_codes(meta)
        listed = equivalent_names(meta, codes, equivalent)
        for name, code in codes.items():
            if code is not None and code not in KILLED and name not in listed:
                left[name.rsplit("__mutmut_", 1)[0]] += 1
    return left


def score(count: Counter) -> float | None:
    scored = count["killed"] + count["survived"] + count["no tests"]
    return count["killed"] / scored if scored else None


def describe(key: Key) -> str:
    """One key as the table shows it: `function`: `line` -> `mutated`."""
    at = f" (occurrence {key.occurrence})" if key.occurrence > 1 else ""
    return f"`{key.function}`{at}: `{key.line}` -> `{key.mutated}`"


def table(
    rows: dict[str, Counter],
    equivalent: dict[Key, str],
    when: str,
    left: Counter | None = None,
    gone: list[Key] | None = None,
) -> str:
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
        flag = "" if s is None or s >= TARGET else " (below 90 %)"
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
    if gone:
        lines += ["", "Equivalent rows that name no mutant of this run (their line changed: judge the mutant "
                  "of the new line, then key it anew or drop the row):", ""]  # fmt: skip
        lines += [f"- {describe(key)}" for key in gone]
    if equivalent:
        lines += ["", "Equivalent mutants (same function as the original), left out of the score:", ""]
        lines += [f"- {describe(key)}: {reason}" for key, reason in sorted(equivalent.items())]
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


def key_rows(mutants: Path, names: list[str]) -> list[str]:
    """The TSV row prefix (function, occurrence, line, mutated) of each of mutmut's mutants `names`."""
    out = []
    for name in names:
        metas = [m for m in mutants.rglob("*.py.meta") if name in _meta_codes(m)]
        if not metas:
            raise SystemExit(f"{mutants}: no mutant {name}")
        key = mutant_keys(metas[0].with_suffix("").read_text(), [name])[name]
        out.append("\t".join([key.function, str(key.occurrence), key.line, key.mutated]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=ROOT / "mutants", help="mutmut's folder (default: %(default)s)")
    parser.add_argument("--write", type=Path, help="write the table into this document, between its markers")
    parser.add_argument("--key", nargs="+", metavar="NAME", help="print the TSV key of each of these mutants")
    args = parser.parse_args(argv)
    if args.key:
        print("\n".join(key_rows(args.mutants, args.key)))
        return 0
    equivalent = equivalents()
    rows = tally(args.mutants, equivalent)
    if not rows:
        print(f"{args.mutants}: no mutation results; run `make mutation` first", file=sys.stderr)
        return 1
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = table(rows, equivalent, when, survivors(args.mutants, equivalent), stale(args.mutants, equivalent))
    print(text)
    if args.write:
        write_into(args.write, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
