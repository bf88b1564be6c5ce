"""Every benchmark, one table: printed, and written to params.yaml's paths.bench_report (make bench).

    python -m bench [--default-run DIR] [--tiny-run DIR] [--only training,saliency,...] [--out FILE]

Each row compares a measurement with a reference measured side by side in the same run
(docs/bench.md says what each row measures and how). Nothing is written unless every row is valid.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

import torch

from bench import assoc_basis, dino_cache, pipeline, saliency, train_throughput
from bench.table import render, write
from emergence.core.config import read_params

# name -> (rows of that benchmark given the runner's arguments); the order of the table
BENCHMARKS = {
    "training": lambda a: train_throughput.rows(train_throughput.parse_args([])),
    "basis": lambda a: [assoc_basis.measure(assoc_basis.parse_args([]))[0]],
    "saliency": lambda a: [saliency.measure(saliency.parse_args([]))],
    "dino": lambda a: [dino_cache.measure(dino_cache.parse_args([]))],
    "pipeline": lambda a: pipeline.rows(a),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--default-run", type=Path, help="checkout of a finished default-profile run (minutes)")
    parser.add_argument("--tiny-run", type=Path, help="checkout of a finished tiny run (default: run one now)")
    parser.add_argument("--repeats", type=int, default=3, help="timed no-op runs of each engine (median)")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated subset of %(default)s")
    parser.add_argument("--out", type=Path, help="table file (default: params.yaml paths.bench_report)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if unknown := set(args.only.split(",")) - set(BENCHMARKS):
        parser.error(f"--only: unknown benchmark {', '.join(sorted(unknown))}; known: {', '.join(BENCHMARKS)}")
    return args


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.machine()}, {os.cpu_count()} cores, {memory:.0f} GiB, torch {torch.__version__}"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = args.out or Path(read_params("params.yaml")["paths"]["bench_report"])
    torch.set_num_threads(args.threads)
    measured = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = []
    for name in args.only.split(","):
        start = time.perf_counter()
        rows += BENCHMARKS[name](args)
        print(f"[bench] {name}: {time.perf_counter() - start:.0f} s", flush=True)
    write(rows, measured, machine(), out)
    print(f"\nmeasured {measured} on {machine()}\n")
    print(render(rows))
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
