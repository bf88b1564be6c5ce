"""mutmut's verdicts kept in the repository (tests/mutation_ledger.tsv), so that a campaign of many hours
survives a fresh checkout:

    python tests/mutation_ledger.py save      # mutants/**/*.py.meta -> the ledger
    python tests/mutation_ledger.py restore   # the ledger -> mutants/, before `mutmut run`

mutmut keeps a verdict while the function's code hashes the same (mutmut 3.8: `create_mutants_for_file`
merges a meta's exit codes only for functions whose hash is unchanged), so a restored verdict is
re-checked exactly when mutmut would re-check a cached one: a changed function is run again, an
unchanged one is not. Like mutmut's own cache, a verdict outlives a change of the tests; the survivors
a new test targets are run again by name (`mutmut run NAME`). Mutant numbers depend on mutmut's
version, so a ledger written by another version is refused.

One line per function: source file, mutant prefix (`module.x_function`), mutmut's hash of the function,
and the exit codes of mutants 1..n in order ("-" for not checked).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mutation_table import mutmut_version

ROOT = Path(__file__).resolve().parents[1]
LEDGER = ROOT / "tests" / "mutation_ledger.tsv"
HEADER = "# mutmut {version}: file, function, hash, exit codes of mutants 1..n (- = not checked)"


def _encode(codes: list[int | None]) -> str:
    return ",".join("-" if c is None else str(c) for c in codes)


def lines_from_metas(mutants: Path) -> list[str]:
    """One ledger line per function with mutants, sorted; numbers must run 1..n in each function."""
    out = []
    for meta in sorted(mutants.rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        by_function: dict[str, dict[int, int | None]] = {}
        for key, code in data["exit_code_by_key"].items():
            prefix, _, number = key.rpartition("__mutmut_")
            by_function.setdefault(prefix, {})[int(number)] = code
        source = str(meta.relative_to(mutants)).removesuffix(".meta")
        for prefix, codes in sorted(by_function.items()):
            if sorted(codes) != list(range(1, len(codes) + 1)):
                raise SystemExit(f"{meta}: {prefix}: mutant numbers are not 1..{len(codes)}")
            digest = data["hash_by_function_name"].get(prefix.rpartition(".")[2], "")
            out.append(f"{source}\t{prefix}\t{digest}\t{_encode([codes[n] for n in sorted(codes)])}")
    return out


def save(mutants: Path, ledger: Path, version: str) -> int:
    """Write the ledger from mutmut's metas (atomically); returns the number of mutants."""
    lines = lines_from_metas(mutants)
    if not lines:
        raise SystemExit(f"{mutants}: no mutation results to save; run `make mutation` first")
    tmp = ledger.with_suffix(".tmp")
    tmp.write_text("\n".join([HEADER.format(version=version), *lines]) + "\n")
    tmp.replace(ledger)
    return sum(len(line.rsplit("\t", 1)[1].split(",")) for line in lines)


def read(ledger: Path, version: str) -> dict[str, dict[str, tuple[str, list[int | None]]]]:
    """source file -> mutant prefix -> (hash, exit codes); refuses another mutmut's ledger or a bad line."""
    text = ledger.read_text().splitlines()
    expected = HEADER.format(version=version)
    if not text or text[0] != expected:
        found = text[0] if text else "an empty file"
        raise SystemExit(f"{ledger}:1: written as {found!r}, this is {expected!r}: mutant numbers may differ")
    by_file: dict[str, dict[str, tuple[str, list[int | None]]]] = {}
    for n, line in enumerate(text[1:], start=2):
        parts = line.split("\t")
        if len(parts) != 4:
            raise SystemExit(f"{ledger}:{n}: expected 4 tab-separated fields, found {len(parts)}")
        source, prefix, digest, codes = parts
        try:
            decoded = [None if c == "-" else int(c) for c in codes.split(",")]
        except ValueError:
            raise SystemExit(f"{ledger}:{n}: {prefix}: exit codes must be integers or '-', got {codes!r}") from None
        by_file.setdefault(source, {})[prefix] = (digest, decoded)
    return by_file


def restore(ledger: Path, mutants: Path, version: str) -> tuple[int, int]:
    """Write a meta for each ledger file that mutants/ has none for (a meta there is newer); returns
    (files written, verdicts restored). mutmut then regenerates the mutants and keeps each verdict whose
    function hashes the same."""
    files = verdicts = 0
    for source, functions in read(ledger, version).items():
        meta = mutants / f"{source}.meta"
        if meta.exists():
            continue
        codes = {
            f"{prefix}__mutmut_{n}": code
            for prefix, (_, decoded) in functions.items()
            for n, code in enumerate(decoded, start=1)
        }
        hashes = {prefix.rpartition(".")[2]: digest for prefix, (digest, _) in functions.items()}
        meta.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "exit_code_by_key": codes,
            "hash_by_function_name": hashes,
            "type_check_error_by_key": {},
            "durations_by_key": {},
            "estimated_durations_by_key": {},
        }
        meta.write_text(json.dumps(body, indent=4))
        files += 1
        verdicts += sum(code is not None for code in codes.values())
    return files, verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["save", "restore"])
    parser.add_argument("--mutants", type=Path, default=ROOT / "mutants", help="mutmut's folder (default: %(default)s)")
    parser.add_argument("--ledger", type=Path, default=LEDGER, help="the ledger (default: %(default)s)")
    args = parser.parse_args(argv)
    version = mutmut_version()
    if args.action == "save":
        print(f"{args.ledger}: {save(args.mutants, args.ledger, version)} mutants saved")
    elif not args.ledger.exists():
        print(f"{args.ledger}: no ledger yet; mutmut starts from scratch", file=sys.stderr)
    else:
        files, verdicts = restore(args.ledger, args.mutants, version)
        print(f"{args.mutants}: {verdicts} verdicts restored into {files} files from {args.ledger}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
