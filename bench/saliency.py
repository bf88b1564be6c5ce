"""Examples/s of attention saliency for all layers and heads: one backward pass
(emergence.interp.saliency.head_saliency) against a per-layer loop with
retain_grad, same model, same batches, same run.

    python -m bench.saliency [--layers 12] [--d-model 256] [--seq 64] [--batch 16]
"""

from __future__ import annotations

import argparse
import time

import torch

from bench.table import print_comparison, row
from emergence.core.models.registry import build_model
from emergence.interp.saliency import head_saliency, head_saliency_per_layer


def rate(fn, model, batches) -> float:
    fn(model, *batches[0])  # warm-up
    start = time.perf_counter()
    for b in batches:
        fn(model, *b)
    return sum(len(b[0]) for b in batches) / (time.perf_counter() - start)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    return parser.parse_args(argv)


def measure(args: argparse.Namespace) -> dict:
    """The table row: examples/s of one backward pass against the per-layer loop."""
    torch.manual_seed(0)
    V = 500
    model = build_model(
        "transformer",
        dict(
            n_layers=args.layers,
            d_model=args.d_model,
            n_heads=args.d_model // 64,
            d_head=64,
            d_mlp=4 * args.d_model,
            n_ctx=args.seq,
            d_vocab=V,
        ),
    ).eval()
    gen = torch.Generator().manual_seed(1)
    batches = [
        (
            torch.randint(0, V, (args.batch, args.seq), generator=gen),
            torch.full((args.batch,), args.seq - 1),
            torch.randint(0, V, (args.batch,), generator=gen),
        )
        for _ in range(args.batches)
    ]
    ours, loop = rate(head_saliency, model, batches), rate(head_saliency_per_layer, model, batches)
    return row(
        f"attention saliency, all layers and heads ({args.layers} layers, d{args.d_model}, seq {args.seq})",
        ours,
        "examples/s",
        "per-layer loop with retain_grad, same model, same run",
        loop,
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    r = measure(args)
    setting = (
        f"{args.layers} layers, d_model {args.d_model}, seq {args.seq}, batch {args.batch}, threads {args.threads}"
    )
    print_comparison(setting, r, "one backward pass", "per-layer loop, retain_grad")


if __name__ == "__main__":
    main()
