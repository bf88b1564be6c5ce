"""Record a finished run beside the estimate `python -m emergence check` gives for it: the run's wall
time per study (its stage records) and in total, with this machine's rates measured right after it.

    python -m bench.estimate_record RUN_DIR [--wall SECONDS] [--profiles tiny] [--engine dvc] [--note TEXT]

RUN_DIR is the checkout the run ran in (its params.yaml, dvc.yaml and logs/stages/); --wall the whole
engine command's wall time (`make repro` less the install; without it, the records' span); --profiles
what was applied to the default params (none for the default; `paper paper_smoke`). The entry is added
to bench/estimate_runs.json (replacing one of the same profiles and engine), and the implied analysis
share of each study is printed: (the study's wall time - its stage starts - its training) / its
training, the numbers estimate.ANALYSIS is set from. tests/unit/test_estimate.py holds today's estimate
against every entry.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from bench.pipeline import stage_records
from emergence.core.config import read_params
from emergence.core.io import write_text
from emergence.estimate import ENGINE_S, STEP_S, jobs, measure

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


def study_walls(run: Path) -> dict[str, dict[str, float]]:
    """Per study: its stage instances' recorded wall seconds (the last successful record of each), their
    number and resources.py's training FLOPs."""
    params = read_params(run / "params.yaml")
    wall = {r["stage"]: r["wall_s"] for r in stage_records(run) if r["exit"] == 0 and r.get("stage")}
    out: dict[str, dict[str, float]] = {}
    for instance, study, w in jobs(params, run):
        s = out.setdefault(study, {"wall_s": 0.0, "stages": 0, "train_flops": 0.0, "train_steps": 0})
        s["wall_s"] += wall.get(instance, 0.0)
        s["stages"] += 1
        if w is not None:
            s["train_flops"] += w.steps * w.flops_per_step
            s["train_steps"] += w.steps
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
    for study, s in studies.items():
        train = s["train_steps"] * STEP_S + s["train_flops"] / rates.flops
        fixed = s["stages"] * rates.start_s
        share = (s["wall_s"] - fixed - train) / train if train else float("nan")
        print(f"{study:<12} wall {s['wall_s'] / 60:6.1f} min, {s['stages']:3d} stages, training {train / 60:6.1f} "
              f"min at the measured rate: analysis share {share:.2f}")  # fmt: skip
    runs = json.loads(RUNS.read_text()) if RUNS.is_file() else []
    runs = [r for r in runs if (r["profiles"], r["engine"]) != (args.profiles, args.engine)] + [entry]
    write_text(json.dumps(runs, indent=1) + "\n", RUNS)
    print(f"{RUNS}: {len(runs)} run(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
