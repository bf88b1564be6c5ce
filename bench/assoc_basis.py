"""Time of the association study's attention terms (Q, Delta): O(T^2) score gradient
against the paper's T x T x T softmax-Jacobian method, same data, same run.

    python -m bench.assoc_basis [--T 200] [--V 3000] [--sequences 64]

Prints both times, the speed-up (goal >= 10x at T = 200) and the largest
relative difference between the two results (goal <= 1e-6).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from bench.table import row
from emergence.studies.assoc.theory import attention_terms, chunk_rows, score_gradient, score_gradient_jacobian


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, default=200)
    parser.add_argument("--V", type=int, default=3000)
    parser.add_argument("--sequences", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    return parser.parse_args(argv)


def measure(args: argparse.Namespace) -> tuple[dict, float]:
    """The table row (time of the O(T^2) gradient against the Jacobian method) and the largest relative
    difference of their results."""
    rng = np.random.default_rng(0)
    sequences = rng.zipf(1.3, size=(args.sequences, args.T + 1)) % args.V  # word-like frequencies
    G = torch.from_numpy(rng.standard_normal((args.V, args.V)))
    rows = chunk_rows(args.T)  # as compute_basis chunks the corpus
    t_fast, (Q, Delta) = timed(lambda: attention_terms(sequences, G, rows, score_fn=score_gradient))
    t_ref, (Q_ref, Delta_ref) = timed(lambda: attention_terms(sequences, G, rows, score_fn=score_gradient_jacobian))
    diff = max(float((Q - Q_ref).norm() / Q_ref.norm()), float((Delta - Delta_ref).norm() / Delta_ref.norm()))
    r = row(
        f"association basis Q, Delta (T={args.T}, |V|={args.V}, {args.sequences} sequences)",
        t_fast,
        "s",
        "T x T x T softmax-Jacobian method, same data, same run",
        t_ref,
        ">= 10x",
        ratio=t_ref / t_fast,  # a speed-up: the reference's time over ours
    )
    return r, diff


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    r, diff = measure(args)
    print(f"T={args.T} |V|={args.V} sequences={args.sequences} threads={args.threads}")
    print(f"O(T^2) score gradient:     {r['value']:8.3f} s")
    print(f"T x T x T Jacobian method: {r['reference_value']:8.3f} s")
    print(f"speed-up: {r['ratio']:.1f}x   max relative difference: {diff:.2e}")


if __name__ == "__main__":
    main()
