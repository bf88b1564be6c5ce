"""Images/s of the DINOv2 feature stage (emergence.studies.grounding.dino_features.encode_images):
batched against one image at a time, same encoder, same images, same run, each
into an empty cache so every image is read, encoded and written.

    python -m bench.dino_cache [--images 32] [--batch 16] [--image-size 112] [--threads 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from bench.table import print_comparison, row
from emergence.studies.grounding.dino_features import encode_images, load_encoder
from emergence.studies.grounding.encoder_params import EncoderParams


def rate(paths: list[Path], params: EncoderParams, encoder, cache_dir: Path) -> float:
    start = time.perf_counter()
    _, info = encode_images(paths, params, encoder, cache_dir)
    assert info["n_encoded"] == len(paths)  # an empty cache: nothing was read back
    return len(paths) / (time.perf_counter() - start)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=112)
    parser.add_argument("--pool-grid", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    return parser.parse_args(argv)


def measure(args: argparse.Namespace) -> dict:
    """The table row: images/s batched against one image at a time."""
    params = EncoderParams(allow_random_init=True, image_size=args.image_size, pool_grid=args.pool_grid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the random-init warning: this bench measures speed only
        encoder = load_encoder(params, "cpu")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = []
        for i in range(args.images):
            paths.append(tmp / f"img{i}.png")
            Image.fromarray(rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)).save(paths[-1])
        batched = EncoderParams(**{**vars(params), "batch_size": args.batch})
        single = EncoderParams(**{**vars(params), "batch_size": 1})
        encode_images(paths[:2], batched, encoder, tmp / "warmup")
        ours, loop = rate(paths, batched, encoder, tmp / "batched"), rate(paths, single, encoder, tmp / "single")
    return row(
        f"DINOv2 features, batch {args.batch} ({encoder.encoder_id}, {args.images} images {args.image_size}px)",
        ours,
        "images/s",
        "one image at a time, same encoder, same run",
        loop,
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    r = measure(args)
    print_comparison(
        f"{r['benchmark']}, pool_grid {args.pool_grid}, threads {args.threads}",
        r,
        f"batch {args.batch}",
        "one at a time",
    )


if __name__ == "__main__":
    main()
