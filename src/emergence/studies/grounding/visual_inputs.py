"""What the visual-dialogue stages read from the pipeline: runs, dialogs, vocabulary, eval set, features."""

from __future__ import annotations

import json
import sys

import pandas as pd
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from emergence.core.config import from_dict, path_of, section
from emergence.core.io import PipelineError, finite, read_parquet
from emergence.studies.grounding.inputs import checked_attention_models
from emergence.studies.grounding.inputs_params import SaliencyParams
from emergence.studies.grounding.tokens import marked_table, read_vocab
from emergence.studies.grounding.visual_params import VisualRuns


def runs_of(params: dict) -> VisualRuns:
    return from_dict(VisualRuns, section(params, "visual_runs"), "visual_runs")


def attention_models(params: dict) -> SaliencyParams:
    """visual_saliency's models: visual_runs models with attention heads (saliency, heads, ablation)."""
    return checked_attention_models(params, "visual_saliency", runs_of(params).models, "visual_runs")


def raw_dialogs(params: dict) -> pd.DataFrame:
    """The extracted dialogs whose image has features: caption words w<ENV>, spoken words w<LAN>, `env` the
    caption's tokens. A dialog whose image dino_features skipped (skip_bad_images) is dropped here, so
    every later stage (vocabulary, held-out set, training in both settings) reads the same dialogs; one
    warning line counts them."""
    dialogs = read_parquet(path_of(params, "visual_dialogs"), {"file": "O", "image_id": "i", "env": "O", "tokens": "O"})
    root = path_of(params, "visual_features")
    encoded = set(read_parquet(root / "images.parquet", {"image_id": "i"})["image_id"].tolist())
    kept = dialogs["image_id"].isin(encoded)
    if not kept.all():
        skipped = sorted(set(dialogs.loc[~kept, "image_id"].tolist()))
        print(
            f"warning: {root}: {int((~kept).sum())} of {len(dialogs)} dialogs dropped, their "
            f"{len(skipped)} image(s) have no features (skipped by dino_features.skip_bad_images: "
            f"image_id {', '.join(map(str, skipped[:5]))}{', ...' if len(skipped) > 5 else ''})",
            file=sys.stderr,
        )
    return dialogs[kept].reset_index(drop=True)


def dialogs(params: dict) -> pd.DataFrame:
    """The dialogs' tokens under the vocabulary's word rule (env_marking); `env` stays as extracted."""
    targets, _, marking = read_vocab(path_of(params, "visual_vocab"))
    return marked_table(raw_dialogs(params), targets, marking)


def eval_set(params: dict) -> pd.DataFrame:
    return read_parquet(
        path_of(params, "visual_eval"),
        {
            "turn": "i",
            "word": "O",
            "context": "O",
            "others": "O",
            "image_id": "i",
            "image_context": "O",
            "other_images": "O",
        },
    )


def features(params: dict) -> tuple[torch.Tensor, dict[int, int], dict]:
    """(features (N_images, P, d), image_id -> row, encoder record) of dino_features."""
    root = path_of(params, "visual_features")
    try:
        feats = load_file(str(root / "features.safetensors"))["features"]
        record = json.loads((root / "encoder.json").read_text(encoding="utf-8"))
    except (OSError, KeyError, ValueError, SafetensorError) as e:  # ValueError: bad JSON or UTF-8
        raise PipelineError(f"{root}: unreadable features ({e.__class__.__name__}: {e})") from e
    images = read_parquet(root / "images.parquet", {"row": "i", "image_id": "i"})
    if feats.ndim != 3 or not feats.is_floating_point():
        raise PipelineError(f"{root}: features must be (images, positions, dim) floats, got {tuple(feats.shape)}")
    finite(feats, root / "features.safetensors", "features")
    if len(images) and not 0 <= images["row"].min() <= images["row"].max() < len(feats):
        raise PipelineError(f"{root}: images.parquet names rows outside the {len(feats)} feature rows")
    return feats, dict(zip(images["image_id"].tolist(), images["row"].tolist())), record


def environment(params: dict, setting: str) -> tuple[torch.Tensor | None, dict[int, int] | None]:
    """What a setting reads besides tokens: the image setting's (features, image_id -> row); else (None, None)."""
    if setting != "image":
        return None, None
    feats, image_row, _ = features(params)
    return feats, image_row
