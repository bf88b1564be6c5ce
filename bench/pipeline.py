"""Pipeline rows: no-op `dvc repro` and `snakemake -n` seconds on the tiny profile, peak RSS per study
(from the tiny run's stage records), end-to-end minutes per study of a default-profile run and its LLC
stages' share of their study.

    python -m bench.pipeline [--default-run DIR] [--tiny-run DIR]

Without --tiny-run, the tiny profile runs once (`dvc repro`, a few minutes) in a project copy under a
temporary folder, as the pipeline tests do. Stage records are logs/stages/*.json in the run's
checkout (src/emergence/core/stage_record.py); a study is the stages/<study>/ package a command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import statistics
import tempfile
import time
from pathlib import Path

from bench.table import not_measured, row
from emergence.core.stage_record import RECORDS
from tests.conftest import BIN, project_copy, run

STUDIES = ("binding", "assoc", "grounding")  # stages/<study>/; the visual grounding stages live in grounding
LLC_STUDIES = ("binding", "grounding")  # the studies with an LLC stage, stages/<study>/llc.py


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--default-run", type=Path, help="checkout of a finished default-profile run")
    parser.add_argument("--tiny-run", type=Path, help="checkout of a finished tiny run (default: run one now)")
    parser.add_argument("--repeats", type=int, default=3, help="timed no-op runs of each engine (median)")
    return parser.parse_args(argv)


def study_of(command: str) -> str:
    """'python -m stages.binding.train --seed 0' -> 'binding'; stages.index_report -> 'index'."""
    module = command.split()[2].split(".")
    return module[1] if len(module) > 2 else module[1].split("_")[0]


def stage_records(root: Path) -> list[dict]:
    folder = root / RECORDS
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def per_study(records: list[dict], key: str, combine) -> dict[str, tuple[float, str]]:
    """{study: (combined value, the command of the largest contribution)} over successful runs; a `--help`
    call exits 0 and leaves a record too, but runs no stage."""
    out: dict[str, list[tuple[float, str]]] = {}
    for r in records:
        if r["exit"] == 0 and not {"-h", "--help"} & set(r["command"].split()):
            out.setdefault(study_of(r["command"]), []).append((r[key], r["stage"] or r["command"]))
    return {s: (combine(v for v, _ in vs), max(vs)[1]) for s, vs in out.items()}


def memory_mib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20


def seconds(cmd: list[str], root: Path, repeats: int) -> float:
    """Median wall seconds of `cmd` in `root` (which must succeed)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(cmd, root)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def yaml_bound(root: Path) -> str:
    """What a no-op `dvc repro` spends its time on: YAML parsing, from one run under cProfile."""
    out = root / ".bench-noop.prof"
    run([str(BIN / "python"), "-m", "cProfile", "-o", str(out), str(BIN / "dvc"), "repro"], root)
    stats = pstats.Stats(str(out)).stats  # (file, line, function) -> (calls, _, own time, cumulative, callers)
    out.unlink()
    yaml = [v for (file, _, fn), v in stats.items() if fn == "parse_yaml" and file.endswith("serialize/_yaml.py")]
    total = max(v[3] for v in stats.values())  # the outermost frame: the whole run
    lock = len((root / "dvc.lock").read_text().splitlines())
    return (
        f"{sum(v[3] for v in yaml) / total:.0%} of it is DVC parsing YAML ({sum(v[0] for v in yaml)} parses: "
        f"dvc.yaml, dvc.lock of {lock} lines, params.yaml once per stage; cProfile, same run)"
    )


def tiny_rows(root: Path, repeats: int) -> list[dict]:
    status = run(["dvc", "status"], root).stdout
    if "up to date" not in status:
        raise AssertionError(f"{root}: the tiny run is not up to date, a no-op would run stages:\n{status}")
    dvc = seconds(["dvc", "repro"], root, repeats)
    smk = seconds(["snakemake", "-n", "--cores", "2", "--quiet"], root, repeats)
    noop = row("no-op `dvc repro`, tiny profile", dvc, "s", target="< 2 s")
    if not noop["met"]:
        noop["bound"] = yaml_bound(root)
    rows = [
        noop,
        row("`snakemake -n`, tiny profile", smk, "s", "no-op `dvc repro`, same run", dvc),
    ]
    peaks = per_study(stage_records(root), "max_rss_mb", max)
    total = memory_mib()
    for study in STUDIES:
        if study not in peaks:
            rows.append(not_measured(f"peak RSS, {study} stages (tiny)", "MiB", "no stage record of this study"))
            continue
        mib, stage = peaks[study]
        rows.append(
            row(f"peak RSS, {study} stages (tiny; largest: {stage})", mib, "MiB", "this machine's memory", total)
        )
    return rows


def default_rows(root: Path | None) -> list[dict]:
    records = stage_records(root) if root else []
    minutes = per_study(records, "wall_s", sum)
    llc = per_study([r for r in records if r["command"].split()[2].endswith(".llc")], "wall_s", sum)
    why = "no --default-run given" if root is None else f"no stage record of this study in {root}"
    rows = []
    for study in STUDIES:
        name = f"end-to-end {study}, default profile (sum of stage wall times)"
        rows.append(row(name, minutes[study][0] / 60, "min") if study in minutes else not_measured(name, "min", why))
    for study in LLC_STUDIES:  # docs/llc.md: the LLC stages cost at most a tenth of their study
        name, target = f"LLC stages of {study}, default profile (sum of their wall times)", "<= 0.1x"
        if study in llc:
            whole = "every stage of the study, the LLC's included (sum of wall times)"
            rows.append(row(name, llc[study][0] / 60, "min", whole, minutes[study][0] / 60, target))
        else:
            rows.append(not_measured(name, "min", why if study not in minutes else "no LLC stage record", target))
    return rows


def rows(args: argparse.Namespace) -> list[dict]:
    if args.tiny_run is not None:
        return tiny_rows(args.tiny_run, args.repeats) + default_rows(args.default_run)
    with tempfile.TemporaryDirectory(prefix="bench-tiny-") as tmp:
        root = project_copy(Path(tmp))
        run(["dvc", "repro"], root)  # every stage writes its record under root/logs/stages
        return tiny_rows(root, args.repeats) + default_rows(args.default_run)


def main(argv: list[str] | None = None) -> None:
    for r in rows(parse_args(argv)):
        print(f"{r['benchmark']}: {r['value']} {r['unit']}  ({r['bound'] or ''})")


if __name__ == "__main__":
    main()
