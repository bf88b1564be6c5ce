"""Frozen DINOv2 patch features for grounding images, computed once and cached.

An image's features are cached under the sha256 of its bytes, in a directory
keyed by the encoder id and the preprocessing (image_size, pool_grid), so a
renamed image is never re-encoded, a new encoder or pooling never reads stale
features, and adding images encodes only the new ones. Weights come only from
a local directory or the local HF cache (this machine is offline); a seeded
random DINOv2 of the same shape is an explicit opt-in for tests and plumbing.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageOps
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from emergence.core.io import PipelineError, atomic_path, file_sha256, finite
from emergence.studies.grounding.encoder_params import RANDOM_INIT_SHAPES, EncoderParams

IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


@dataclass
class Encoder:
    model: torch.nn.Module
    encoder_id: str  # "<name>@<sha of config+weights>" or "random-init:<name>:seed<k>@<sha of weights>"
    pretrained: bool


def weight_files(d: Path) -> list[Path]:
    """The weight files we load: safetensors only (a .bin checkpoint is a pickle and could run code)."""
    return sorted(d.glob("*.safetensors"))


def pickled_only(d: Path, params: EncoderParams, where: str) -> None:
    """A folder with a .bin checkpoint and no safetensors: refused, or with allow_random_init a warning
    naming the file; else the random init that follows would pass over the user's weights unsaid."""
    bins = sorted(d.glob("*.bin")) if d.is_dir() and not weight_files(d) else []
    if not bins:
        return
    why = f"{bins[0]}: not read, only safetensors are (a .bin is a pickle, which can run code)"
    if not params.allow_random_init:
        raise PipelineError(
            f"{where}: {why}; place the model.safetensors of {params.name or 'the model'} in the directory "
            f"{where}.local_dir names"
        )
    warnings.warn(f"{where}: {why}", stacklevel=3)


def find_weights(params: EncoderParams, where: str = "dino_features") -> tuple[Path | None, str]:
    """(directory holding config.json + weights or None, where we looked)."""
    if params.local_dir:
        d = Path(params.local_dir)
        looked = str(d)
    else:
        from huggingface_hub import constants, snapshot_download
        from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

        looked = f"the HF cache {constants.HF_HUB_CACHE}"
        try:
            d = Path(snapshot_download(params.name, local_files_only=True))
        except (LocalEntryNotFoundError, HFValidationError):
            return None, looked
    pickled_only(d, params, where)
    return (d if (d / "config.json").is_file() and weight_files(d) else None), looked


def load_pretrained(d: Path, label: str) -> Encoder:
    config = d / "config.json"
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (ValueError, AttributeError) as e:  # bad JSON or UTF-8, or not an object
        raise PipelineError(f"{config}: not a readable model config ({e.__class__.__name__})") from e
    if model_type != "dinov2":
        raise PipelineError(f"{config}: model_type is {model_type!r}, not 'dinov2'")
    h = hashlib.sha256()
    for f in [config, *weight_files(d)]:  # the bytes define the features, not the path or the name
        h.update(f"{f.name}:{file_sha256(f)}\n".encode())
    model = from_local_dir(d)
    return Encoder(model, f"{label}@{h.hexdigest()[:12]}", pretrained=True)


def from_local_dir(d: Path) -> torch.nn.Module:
    """Dinov2Model.from_pretrained(d), offline, float32, safetensors only; a file it cannot use is one line
    naming it. Its load report (a table of keys) is kept off stderr: what it says is that line."""
    from huggingface_hub.errors import StrictDataclassError
    from transformers import Dinov2Model
    from transformers.utils import logging as hf_logging

    config, level = d / "config.json", hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        model, info = Dinov2Model.from_pretrained(
            d,
            local_files_only=True,
            dtype=torch.float32,
            use_safetensors=True,
            ignore_mismatched_sizes=True,  # reported as info, refused below with the key and both shapes
            output_loading_info=True,
        )
    except SafetensorError as e:
        raise PipelineError(
            f"{unreadable_weights(d)}: not readable safetensors (SafetensorError: {one_line(e)})"
        ) from e
    except StrictDataclassError as e:  # transformers checks config.json's values against Dinov2Config's types
        raise PipelineError(f"{config}: not a valid DINOv2 config ({one_line(e)})") from e
    except OSError as e:  # from_pretrained's own file lookup: no model.safetensors (or index) by that name
        raise PipelineError(f"{d}: {one_line(e)}") from e
    except KeyError as e:  # a name transformers has no entry for (hidden_act): say which key gave it
        values = json.loads(config.read_text(encoding="utf-8"))
        keys = [k for k, v in values.items() if e.args and v == e.args[0]] or ["a value"]
        raise PipelineError(f"{config}: {', '.join(keys)}: {e.args[0]!r} is not a name transformers knows") from e
    except (ZeroDivisionError, ValueError) as e:
        # building the model from config.json's values: a size of 0, heads not dividing hidden_size
        raise PipelineError(f"{config}: no DINOv2 can be built from it ({type(e).__name__}: {one_line(e)})") from e
    finally:
        hf_logging.set_verbosity(level)
    if info["mismatched_keys"]:
        key, theirs, ours = min(info["mismatched_keys"])  # a set: the first by name
        raise PipelineError(
            f"{config}: {key} has shape {list(ours)} by it, {list(theirs)} in the weights "
            f"({', '.join(f.name for f in weight_files(d))}); config and weights are of different models"
        )
    if missing := info["missing_keys"]:
        warnings.warn(
            f"{d}: {len(missing)} DINOv2 weight(s) not in its safetensors (e.g. {sorted(missing)[0]}), "
            "left at random init",
            stacklevel=3,
        )
    return model


def unreadable_weights(d: Path) -> Path | str:
    """The first weight file of `d` whose header safetensors refuses, else all of them (the error was in
    their tensors' bytes)."""
    from safetensors import safe_open

    files = weight_files(d)
    for f in files:
        try:
            with safe_open(f, "pt"):
                pass
        except SafetensorError:
            return f
    return ", ".join(map(str, files))


def one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def random_init(name: str, seed: int, where: str) -> Encoder:
    from transformers import Dinov2Config, Dinov2Model

    if name not in RANDOM_INIT_SHAPES:
        raise PipelineError(
            f"{where}.name: no local weights and no random-init shape for {name!r} "
            f"(known: {', '.join(RANDOM_INIT_SHAPES)})"
        )
    with torch.random.fork_rng(devices=[]):  # leave the caller's RNG stream untouched
        torch.manual_seed(seed)
        model = Dinov2Model(Dinov2Config(**RANDOM_INIT_SHAPES[name]))
    # The weights go into the id: a transformers release that initialises differently gets a new cache key.
    h = hashlib.sha256()
    for key, t in model.state_dict().items():
        h.update(key.encode())
        h.update(t.numpy().tobytes())
    warnings.warn(
        f"{where}: using a random-init DINOv2 ({name}, seed {seed}): features carry no pretrained semantics",
        stacklevel=2,
    )
    return Encoder(model, f"random-init:{name}:seed{seed}@{h.hexdigest()[:12]}", pretrained=False)


def load_encoder(params: EncoderParams, device: str | torch.device = "cpu", where: str = "dino_features") -> Encoder:
    params.validate(where)
    d, looked = find_weights(params, where)
    if d is not None:
        enc = load_pretrained(d, params.name or d.name)
    elif params.allow_random_init:
        enc = random_init(params.name, params.seed, where)
    else:
        raise PipelineError(
            f"{where}: no DINOv2 weights for {params.name} in {looked}: place its config.json and "
            f"model.safetensors in the directory {where}.local_dir names (a copy of a Hugging Face cache "
            f"snapshot will do); the pipeline never downloads them"
        )
    enc.model.eval().requires_grad_(False).to(device)
    return enc


def image_key(path: str | Path) -> str:
    return file_sha256(path)


def load_image(path: str | Path, size: int) -> torch.Tensor:
    """(3, size, size): turned as the photo's EXIF orientation says it is shown, RGB, bicubic resize
    to a square, ImageNet mean/std normalisation."""
    try:
        with Image.open(path) as img:
            shown = ImageOps.exif_transpose(img)  # a camera's rotated photo, upright
            rgb = shown.convert("RGB").resize((size, size), Image.Resampling.BICUBIC)
    except FileNotFoundError as e:
        raise PipelineError(f"{path}: image file not found") from e
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise PipelineError(f"{path}: not a readable image ({e.__class__.__name__}: {e})") from e
    x = torch.from_numpy(np.asarray(rgb, dtype=np.float32) / 255.0).permute(2, 0, 1)  # (3, size, size)
    return (x - IMAGENET_MEAN) / IMAGENET_STD


def pool_patches(patches: torch.Tensor, pool_grid: int, where: str = "dino_features") -> torch.Tensor:
    """(B, P, d) patch tokens of square images -> (B, pool_grid**2, d) average-pooled (0 = all patches)."""
    if not pool_grid:
        return patches
    B, P, d = patches.shape
    g = int(round(P**0.5))  # square images -> a g x g patch grid
    if pool_grid > g:
        raise PipelineError(
            f"{where}.pool_grid: {pool_grid} exceeds the {g}x{g} patch grid (raise image_size or lower pool_grid)"
        )
    grid = patches.transpose(1, 2).reshape(B, d, g, g)  # (B, d, g, g), row-major like the patch order
    return F.adaptive_avg_pool2d(grid, pool_grid).flatten(2).transpose(1, 2)  # (B, pool_grid**2, d)


def encode_batch(encoder: Encoder, images: torch.Tensor, pool_grid: int, where: str = "dino_features") -> torch.Tensor:
    """(B, n_tokens, d) float32 on the CPU: last-layer patch tokens, average-pooled to pool_grid**2."""
    device = next(encoder.model.parameters()).device
    with torch.no_grad():
        hidden = encoder.model(pixel_values=images.to(device)).last_hidden_state  # (B, 1 + P, d)
    return pool_patches(hidden[:, 1:].float(), pool_grid, where).contiguous().cpu()  # the CLS token dropped


def encoder_layers(
    encoder: Encoder, images: torch.Tensor, pool_grid: int, where: str = "dino_features"
) -> list[torch.Tensor]:
    """Pooled patch tokens after every layer (0 = embeddings), each through the final layer norm as
    DINOv2's intermediate-layer readout does (the last equals encode_batch's): a list of (B, n_tokens, d)."""
    device = next(encoder.model.parameters()).device
    with torch.no_grad():
        hidden = encoder.model(pixel_values=images.to(device), output_hidden_states=True).hidden_states
        return [pool_patches(encoder.model.layernorm(h)[:, 1:].float(), pool_grid, where).cpu() for h in hidden]


PREPROCESSING = (
    "exif-upright"  # in the cache key: entries encoded before load_image turned photos upright are not reused
)


def cache_key(encoder_id: str, params: EncoderParams) -> str:
    # batch_size is part of the key: CPU kernels round differently for small batches (see encode_padded).
    key = f"{encoder_id}|{params.image_size}|{params.pool_grid}|{params.batch_size}|{PREPROCESSING}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def encode_padded(encoder: Encoder, images: list[torch.Tensor], params: EncoderParams, where: str) -> torch.Tensor:
    """(len(images), n_tokens, d): encoded in a batch padded to batch_size with blank images.

    The kernels pick their blocking by batch shape (batches of 1-2 differ from larger ones in the
    last bits), so every batch has the same shape: an image's features do not depend on which
    images it was encoded with, and the artifact does not depend on the cache's history.
    """
    batch = torch.stack(images)  # (b, 3, size, size)
    pad = params.batch_size - len(images)
    if pad > 0:
        batch = torch.cat([batch, batch.new_zeros(pad, *batch.shape[1:])])
    return encode_batch(encoder, batch, params.pool_grid, where)[: len(images)]


def cached_features(path: Path) -> torch.Tensor | None:
    """One image's cached features, or None when absent, unreadable (truncated, foreign) or holding a nan or
    inf: the cache is no artifact, so a bad entry is encoded again and overwritten, with a warning."""
    if not path.is_file():
        return None
    try:
        return finite(load_file(path)["features"], path, "cached features")
    except PipelineError as e:  # nan or inf
        warnings.warn(f"{e}; encoding the image again", stacklevel=2)
    except (SafetensorError, OSError, KeyError) as e:
        warnings.warn(
            f"{path}: unreadable cache entry ({e.__class__.__name__}), encoding the image again", stacklevel=2
        )
    return None


def skip_hint(where: str) -> str:
    return f"; set {where}.skip_bad_images: true to leave bad images and their dialogs out"


def encode_images(
    paths: Sequence[str | Path],
    params: EncoderParams,
    encoder: Encoder,
    cache_dir: str | Path,
    where: str = "dino_features",
) -> tuple[torch.Tensor, dict]:
    """(N_kept, n_tokens, d) features in `paths` order, and what was encoded, cached or skipped.

    info["kept"] lists the indices into `paths` the rows belong to; only with
    skip_bad_images can it be shorter than `paths`.
    """
    key_dir = Path(cache_dir) / cache_key(encoder.encoder_id, params)
    keys: dict[int, str] = {}  # index into paths -> image sha
    for i, p in enumerate(paths):
        try:
            keys[i] = image_key(p)
        except OSError as e:
            if not params.skip_bad_images:
                raise PipelineError(f"{p}: image file not readable ({e.__class__.__name__}){skip_hint(where)}") from e
    feats = {k: f for k in set(keys.values()) if (f := cached_features(key_dir / f"{k}.safetensors")) is not None}
    n_cached = len(feats)
    first: dict[str, int] = {}  # new image sha -> its first path: duplicate images are encoded once
    for i, k in keys.items():
        if k not in feats:
            first.setdefault(k, i)
    todo = list(first.items())
    # One metadata key: safetensors writes a multi-key metadata map in arbitrary order (bytes would vary per run).
    meta = {
        "dino": json.dumps(
            {"encoder_id": encoder.encoder_id, "image_size": params.image_size, "pool_grid": params.pool_grid},
            sort_keys=True,
        )
    }
    with tqdm(total=len(todo), desc="dino features", unit="img", disable=not todo) as bar:
        for start in range(0, len(todo), params.batch_size):
            chunk = todo[start : start + params.batch_size]
            images, done = [], []
            for k, i in chunk:
                try:
                    images.append(load_image(paths[i], params.image_size))
                    done.append(k)
                except PipelineError as e:
                    if not params.skip_bad_images:
                        raise PipelineError(f"{e}{skip_hint(where)}") from e
            if images:
                out = encode_padded(encoder, images, params, where)  # (b, n_tokens, d)
                for k, f in zip(done, out):
                    feats[k] = f.clone()  # own storage, not a view of the batch
                    with atomic_path(key_dir / f"{k}.safetensors") as tmp:
                        save_file({"features": feats[k]}, str(tmp), metadata=meta)
            bar.update(len(chunk))
    kept = [i for i, k in keys.items() if k in feats]
    kept_set = set(kept)
    if not kept:
        raise PipelineError(f"{where}: none of the {len(paths)} images could be read")
    info = {
        "encoder_id": encoder.encoder_id,
        "pretrained": encoder.pretrained,
        "n_encoded": len(feats) - n_cached,
        "n_cached": n_cached,
        "skipped": [str(paths[i]) for i in range(len(paths)) if i not in kept_set],
        "kept": kept,
    }
    return torch.stack([feats[keys[i]] for i in kept]), info
