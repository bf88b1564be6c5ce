"""Record a finished run beside the estimate `python -m emergence check` gives for it: the run's wall
time per study (its stage records) and in total, with this machine's rates measured right after it.

    python -m bench.estimate_record RUN_DIR [--wall SECONDS] [--profiles tiny] [--engine dvc] [--note TEXT]

RUN_DIR is the checkout the run ran in (its params.yaml, dvc.yaml and logs/stages/); --wall the whole
engine command's wall time (`make repro` less the install; without it, the records' span); --profiles
what was applied to the default params (none for the default; `paper paper_smoke`). The entry is added
to bench/estimate_runs.json (replacing one of the same profiles and engine), and each study's recorded
wall time is printed beside today's estimate of it (its stage starts, training and analyses, without
the engine). tests/unit/test_estimate.py holds today's estimate against every entry.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from bench.pipeline import stage_records
from emergence.core.config import read_params
from emergence.core.declared import instance_of_module
from emergence.core.io import write_text
from emergence.estimate import ENGINE_S, estimate, jobs, measure

RUNS = Path(__file__).parent / "estimate_runs.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="checkout of the finished run")
    parser.add_argument(
        "--wall",
        type=float,
        help="the engine command's wall seconds (default: from the first stage's start to the last one's end)",
    )
    parser.add_argument("--profiles", nargs="*", default=[], help="profiles applied to the default, in order")
    parser.add_argument("--engine", choices=list(ENGINE_S), default="dvc")
    parser.add_argument("--note", default="", help="what else ran on the machine, and where")
    return parser.parse_args(argv)


def record_instance(record: dict, run: Path, params: dict) -> str | None:
    """The stage instance a record is of: its `stage` (DVC), else the instance its command runs
    (Snakemake's records name none: `python -m stages.assoc.causal --layers 3 --seed 42`)."""
    if record.get("stage"):
        return record["stage"]
    argv = shlex.split(record["command"])
    if argv[1:2] != ["-m"] or len(argv) < 3:
        return None
    found = instance_of_module(argv[2], run, argv[3:], params)
    return None if found is None else found.name


def study_walls(run: Path) -> dict[str, dict[str, float]]:
    """Per study: its stage instances' recorded wall seconds (the last successful record of each) and
    their number."""
    params = read_params(run / "params.yaml")
    wall = {record_instance(r, run, params): r["wall_s"] for r in stage_records(run) if r["exit"] == 0}
    out: dict[str, dict[str, float]] = {}
    for instance, study, _ in jobs(params, run):
        s = out.setdefault(study, {"wall_s": 0.0, "stages": 0})
        s["wall_s"] += wall.get(instance, 0.0)
        s["stages"] += 1
    return out


def records_wall(run: Path) -> float:
    """From the first stage record's start to the last one's end: the run's wall time less the engine's
    start and its last lock write."""
    spans = [
        (datetime.fromisoformat(r["started"].replace("Z", "+00:00")).timestamp(), r["wall_s"])
        for r in stage_records(run)
    ]
    return max(t + w for t, w in spans) - min(t for t, _ in spans)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wall = args.wall if args.wall is not None else records_wall(args.run)
    params = read_params(args.run / "params.yaml")
    rates = measure(params["base"]["threads"], args.run)
    studies = study_walls(args.run)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.run, capture_output=True, text=True)
    entry = {
        "profiles": args.profiles,
        "engine": args.engine,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": commit.stdout.strip(),
        "machine": f"{platform.processor() or platform.machine()}, threads {params['base']['threads']}",
        "note": args.note,
        "rates": {"flops": round(rates.flops), "start_s": round(rates.start_s, 3)},
        "wall_s": round(wall, 1),
        "studies": {k: round(v["wall_s"], 1) for k, v in studies.items()},
    }
    per = estimate(params, args.run, rates, args.engine)
    for study, s in studies.items():
        e = per[study]
        est = e["total_s"] - e["stages"] * ENGINE_S[args.engine]
        ratio = est / s["wall_s"] if s["wall_s"] else float("nan")
        print(f"{study:<12} wall {s['wall_s'] / 60:6.1f} min, {s['stages']:3d} stages; estimate {est / 60:6.1f} min "
              f"(training {e['training_s'] / 60:.1f}, analyses {e['analysis_s'] / 60:.1f}): {ratio:.2f}x")  # fmt: skip
    runs = json.loads(RUNS.read_text()) if RUNS.is_file() else []
    runs = [r for r in runs if (r["profiles"], r["engine"]) != (args.profiles, args.engine)] + [entry]
    write_text(json.dumps(runs, indent=1) + "\n", RUNS)
    print(f"{RUNS}: {len(runs)} run(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
