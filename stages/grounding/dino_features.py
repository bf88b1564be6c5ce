"""Frozen DINOv2 patch features of every dialog's image, cached by image content and encoder.

Writes features.safetensors ((N_images, n_tokens, d) float32), images.parquet
(row -> image_id, file, sha256) and encoder.json (encoder id, whether it is
pretrained, skipped files). Only images not yet in the cache (paths.dino_cache)
are encoded; how many were encoded or read from the cache goes to the log,
not the artifact, so the artifact's bytes do not depend on the cache.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import save_file

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, load_base, path_of, section
from emergence.core.io import PipelineError, atomic_path, read_parquet, write_json, write_parquet
from emergence.core.train.loop import resolve_device
from emergence.studies.grounding.dino_features import encode_images, image_key, load_encoder, skip_hint
from emergence.studies.grounding.encoder_params import EncoderParams
from emergence.studies.grounding.visdial import find_images

NOT_PRETRAINED = "encoder not pretrained"


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(EncoderParams, section(params, "dino_features"), "dino_features")
    dialogs = read_parquet(path_of(params, "visual_dialogs"), {"image_id": "i"})
    image_ids = sorted(set(dialogs["image_id"].tolist()))
    files = find_images(path_of(params, "visual_images"), image_ids)
    missing = [i for i, f in zip(image_ids, files) if f is None]
    if missing and not p.skip_bad_images:
        raise PipelineError(
            f"{path_of(params, 'visual_images')}: no image file for image_id {missing[0]} "
            f"({len(missing)} missing){skip_hint('dino_features')}"
        )
    present = [(i, f) for i, f in zip(image_ids, files) if f is not None]
    encoder = load_encoder(p, resolve_device(load_base(params).device), where="dino_features")
    features, info = encode_images(
        [f for _, f in present], p, encoder, path_of(params, "dino_cache"), where="dino_features"
    )
    kept = [present[k] for k in info["kept"]]
    images = pd.DataFrame(
        {
            "row": range(len(kept)),
            "image_id": [i for i, _ in kept],
            "file": [f.name for _, f in kept],
            "sha256": [image_key(f) for _, f in kept],
        }
    )
    record = {
        "encoder_id": info["encoder_id"],
        "pretrained": info["pretrained"],
        "note": "" if info["pretrained"] else NOT_PRETRAINED,
        "image_size": p.image_size,
        "pool_grid": p.pool_grid,
        "n_images": len(kept),
        "skipped": [Path(f).name for f in info["skipped"]] + [f"image_id {i}: no file" for i in missing],
    }
    out = path_of(params, "visual_features")
    with atomic_path(out) as tmp:
        tmp.mkdir(parents=True)
        save_file(
            {"features": features.to(torch.float32).contiguous()},
            str(tmp / "features.safetensors"),
            metadata={"encoder_id": info["encoder_id"]},
        )
        write_parquet(images, tmp / "images.parquet")
        write_json(record, tmp / "encoder.json")
    if record["skipped"]:  # skip_bad_images: the later stages drop these images' dialogs (visual_inputs.raw_dialogs)
        print(
            f"warning: dino_features: {len(record['skipped'])} image(s) skipped (skip_bad_images), their dialogs "
            f"are left out of every later stage: {', '.join(record['skipped'][:5])}",
            file=sys.stderr,
        )
    print(
        f"dino_features: {info['n_encoded']} images encoded, {info['n_cached']} read from the cache"
        + ("" if info["pretrained"] else f" ({NOT_PRETRAINED})"),
        file=sys.stderr,
    )


if __name__ == "__main__":
    raise SystemExit(main())
