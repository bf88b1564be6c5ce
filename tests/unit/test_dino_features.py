"""DINOv2 image features: offline loading, random-init opt-in, content-keyed cache, pooling, bad images."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from refusals import assert_names, key_of, refuses, refuses_key
from safetensors.torch import save_file

from emergence.studies.grounding import dino_features as dino
from emergence.studies.grounding.dino_features import (
    encode_batch,
    encode_images,
    encoder_layers,
    image_key,
    load_encoder,
    load_image,
)
from emergence.studies.grounding.encoder_params import PATCH, EncoderParams

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.filterwarnings("ignore:.*random-init DINOv2")]

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, patch_size=8, image_size=32)
SIZE = 32  # 4x4 patch grid with patch 8


def save_tiny(d: Path, seed: int) -> Path:
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(seed)
    Dinov2Model(Dinov2Config(**TINY)).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("tiny_dinov2"), seed=0)


@pytest.fixture
def empty_hf_cache(tmp_path, monkeypatch) -> Path:
    from huggingface_hub import constants

    cache = tmp_path / "hf_cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def write_png(path: Path, seed: int, size=(20, 24)) -> Path:
    pixels = np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


def images(d: Path, n: int, start: int = 0) -> list[Path]:
    d.mkdir(exist_ok=True)
    return [write_png(d / f"img{i}.png", seed=i) for i in range(start, start + n)]


def params(tiny_dir: Path, **kw) -> EncoderParams:
    return EncoderParams(**{"local_dir": str(tiny_dir), "image_size": SIZE, "pool_grid": 2, "batch_size": 2, **kw})


def test_loads_from_a_local_directory_and_the_id_follows_the_bytes(tiny_dir, tmp_path):
    enc = load_encoder(params(tiny_dir), "cpu")
    assert enc.pretrained and enc.encoder_id.startswith("facebook/dinov2-small@")
    assert not enc.model.training
    moved = load_encoder(params(shutil.copytree(tiny_dir, tmp_path / "elsewhere")), "cpu")
    assert moved.encoder_id == enc.encoder_id  # same bytes elsewhere: same id, same cache
    other = load_encoder(params(save_tiny(tmp_path / "other", seed=1)), "cpu")
    assert other.encoder_id != enc.encoder_id
    x = torch.randn(2, 3, SIZE, SIZE)
    assert not torch.equal(encode_batch(enc, x, 0), encode_batch(other, x, 0))  # the weights were really loaded


def test_weights_found_win_over_an_allowed_random_init(tiny_dir):
    # allow_random_init is a fallback only: with the weights at hand they are what encodes
    enc = load_encoder(params(tiny_dir, allow_random_init=True), "cpu")
    assert enc.pretrained and enc.encoder_id == load_encoder(params(tiny_dir), "cpu").encoder_id


def test_finds_weights_in_the_hf_cache(tiny_dir, empty_hf_cache):
    commit = "0" * 40
    repo = empty_hf_cache / "models--facebook--dinov2-small"
    shutil.copytree(tiny_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    enc = load_encoder(EncoderParams(), "cpu")
    assert enc.pretrained and enc.encoder_id == load_encoder(params(tiny_dir), "cpu").encoder_id
    assert enc.model.config.hidden_size == 32


def test_no_weights_is_a_plain_error_unless_random_init_is_allowed(empty_hf_cache, tmp_path):
    # the model, where it was looked for, the files wanted and the key that names their directory
    named = ["facebook/dinov2-small", f"{empty_hf_cache}: ", "config.json", "model.safetensors"]
    with refuses(*named, "grounding_images.local_dir") as e:
        load_encoder(EncoderParams(), "cpu", where="grounding_images")
    assert key_of(str(e.value)) == "grounding_images"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text('{"model_type": "dinov2"}')  # a config without weights is not weights
    with refuses("dino_features: ", f"{empty}: ", "model.safetensors", "dino_features.local_dir"):
        load_encoder(EncoderParams(local_dir=str(empty)), "cpu")
    with refuses("'facebook/dinov2-huge'", "random-init", ", ".join(dino.RANDOM_INIT_SHAPES)) as e:
        load_encoder(EncoderParams(name="facebook/dinov2-huge", allow_random_init=True), "cpu")
    assert key_of(str(e.value)) == "dino_features.name"  # the name, then every name random init knows
    assert ", ".join(dino.RANDOM_INIT_SHAPES).startswith("facebook/dinov2-small, facebook/dinov2-base")


def test_a_non_dinov2_directory_is_rejected(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "vit"}')
    (tmp_path / "model.safetensors").write_bytes(b"x")
    with refuses(f"{tmp_path / 'config.json'}: ", "model_type", "'vit'", "'dinov2'"):
        load_encoder(EncoderParams(local_dir=str(tmp_path)), "cpu")


def test_random_init_is_deterministic_and_leaves_the_caller_rng_alone(empty_hf_cache, tmp_path):
    p = EncoderParams(allow_random_init=True, image_size=28, pool_grid=0)
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    with pytest.warns(UserWarning, match="random-init DINOv2"):
        a = load_encoder(p, "cpu")
    assert torch.equal(torch.rand(3), expected)
    b = load_encoder(p, "cpu")
    assert a.pretrained is False  # written to encoder.json as false, not null
    assert re.fullmatch(r"random-init:facebook/dinov2-small:seed0@[0-9a-f]{12}", a.encoder_id)
    assert a.encoder_id == b.encoder_id
    assert a.model.config.hidden_size == 384 and a.model.config.num_hidden_layers == 12
    paths = images(tmp_path / "imgs", 2)
    fa, _ = encode_images(paths, p, a, tmp_path / "cache_a")
    fb, _ = encode_images(paths, p, b, tmp_path / "cache_b")
    assert fa.shape == (2, 4, 384) and torch.equal(fa, fb)


def test_random_init_seed_changes_the_encoder(empty_hf_cache, monkeypatch):
    monkeypatch.setitem(dino.RANDOM_INIT_SHAPES, "facebook/dinov2-small", TINY)
    ids = [load_encoder(EncoderParams(allow_random_init=True, seed=s), "cpu").encoder_id for s in (0, 0, 1)]
    assert ids[0] == ids[1] != ids[2] and ids[2].startswith("random-init:facebook/dinov2-small:seed1@")


def test_cache_encodes_only_new_images(tiny_dir, tmp_path):
    enc, p, cache = load_encoder(params(tiny_dir), "cpu"), params(tiny_dir), tmp_path / "cache"
    paths = images(tmp_path / "imgs", 3)
    first, info = encode_images(paths, p, enc, cache)
    assert (info["n_encoded"], info["n_cached"], info["skipped"], info["kept"]) == (3, 0, [], [0, 1, 2])
    assert info["encoder_id"] == enc.encoder_id and info["pretrained"] is True
    again, info = encode_images(paths, p, enc, cache)
    assert (info["n_encoded"], info["n_cached"]) == (0, 3) and torch.equal(again, first)
    paths += images(tmp_path / "imgs", 1, start=3)
    more, info = encode_images(paths, p, enc, cache)
    assert (info["n_encoded"], info["n_cached"]) == (1, 3)  # adding one image encodes exactly one
    assert torch.equal(more[:3], first)
    alone = torch.cat([encode_batch(enc, load_image(q, SIZE)[None], 2) for q in paths])
    assert torch.allclose(more, alone, atol=1e-5)  # batched and cached rows match one-at-a-time encoding
    key_dirs = list(cache.iterdir())
    assert len(key_dirs) == 1 and len(list(key_dirs[0].glob("*.safetensors"))) == 4
    assert {f.stem for f in key_dirs[0].glob("*.safetensors")} == {image_key(q) for q in paths}


def test_features_and_cache_bytes_do_not_depend_on_the_cache_history(tiny_dir, tmp_path):
    """One image added at a time gives the same bytes as all images at once: batches are padded
    to one shape (small batches round differently) and the cache file's header is canonical."""
    enc, p = load_encoder(params(tiny_dir, batch_size=4), "cpu"), params(tiny_dir, batch_size=4)
    paths = images(tmp_path / "imgs", 5)
    at_once, _ = encode_images(paths, p, enc, tmp_path / "at_once")
    for n in range(1, 6):
        one_by_one, _ = encode_images(paths[:n], p, enc, tmp_path / "one_by_one")
    assert torch.equal(one_by_one, at_once)
    files = {
        d.name: sorted(f.read_bytes() for f in (tmp_path / d.name).rglob("*.safetensors"))
        for d in (tmp_path / "at_once", tmp_path / "one_by_one")
    }
    assert files["at_once"] == files["one_by_one"]


def test_cache_is_keyed_by_content_pooling_and_encoder(tiny_dir, tmp_path):
    enc, p, cache = load_encoder(params(tiny_dir), "cpu"), params(tiny_dir), tmp_path / "cache"
    paths = images(tmp_path / "imgs", 2)
    feats, _ = encode_images(paths, p, enc, cache)
    renamed = [shutil.copy(paths[1], tmp_path / "renamed.png"), paths[0], paths[1]]
    out, info = encode_images(renamed, p, enc, cache)
    assert (info["n_encoded"], info["n_cached"]) == (0, 2) and torch.equal(out, feats[[1, 0, 1]])
    _, info = encode_images(paths, params(tiny_dir, pool_grid=1), enc, cache)
    assert info["n_encoded"] == 2
    other = load_encoder(params(save_tiny(tmp_path / "other", seed=1)), "cpu")
    _, info = encode_images(paths, p, other, cache)
    assert info["n_encoded"] == 2
    assert len(list(cache.iterdir())) == 3


def test_pooling_shapes_and_values(tiny_dir):
    enc = load_encoder(params(tiny_dir), "cpu")
    x = torch.randn(3, 3, SIZE, SIZE)
    full = encode_batch(enc, x, 0)
    assert full.shape == (3, 16, 32) and full.dtype == torch.float32 and not full.requires_grad
    pooled = encode_batch(enc, x, 2)
    assert pooled.shape == (3, 4, 32)
    assert torch.allclose(pooled[:, 0], full[:, [0, 1, 4, 5]].mean(1), atol=1e-6)  # top-left 2x2 of the row-major grid
    assert torch.allclose(pooled[:, 3], full[:, [10, 11, 14, 15]].mean(1), atol=1e-6)
    assert torch.allclose(encode_batch(enc, x, 1)[:, 0], full.mean(1), atol=1e-6)
    with refuses("dino_features.pool_grid: ", 5, "4x4"):
        encode_batch(enc, x, 5)


def test_every_layer_is_read_through_the_final_norm(tiny_dir):
    enc = load_encoder(params(tiny_dir), "cpu")
    x = torch.randn(2, 3, SIZE, SIZE)
    layers = encoder_layers(enc, x, 2)
    assert len(layers) == enc.model.config.num_hidden_layers + 1  # the embeddings, then every layer
    assert all(h.shape == (2, 4, 32) for h in layers) and not torch.allclose(layers[0], layers[-1])
    torch.testing.assert_close(layers[-1], encode_batch(enc, x, 2))  # the last is what the stage caches
    with refuses(5, "4x4") as e:
        encoder_layers(enc, x, 5)
    assert key_of(str(e.value)) == "dino_features.pool_grid"
    with refuses(5, "4x4") as e:
        encoder_layers(enc, x, 5, "visual_lens")
    assert key_of(str(e.value)) == "visual_lens.pool_grid"


def test_images_are_moved_to_the_encoders_device(tiny_dir):
    moved_to = []

    class Spy(torch.Tensor):  # records where the images are sent (a CPU-only machine cannot see it otherwise)
        def to(self, *args, **kwargs):
            moved_to.append(args)
            return super().to(*args, **kwargs).as_subclass(torch.Tensor)

    enc = load_encoder(params(tiny_dir), "cpu")
    encoder_layers(enc, torch.randn(1, 3, SIZE, SIZE).as_subclass(Spy), 2)
    encode_batch(enc, torch.randn(1, 3, SIZE, SIZE).as_subclass(Spy), 2)
    assert moved_to == [(torch.device("cpu"),)] * 2


def test_load_image_and_key(tmp_path):
    path = tmp_path / "grey.png"
    Image.fromarray(np.full((10, 30, 3), (124, 116, 104), dtype=np.uint8)).save(path)
    x = load_image(path, 14)
    assert x.shape == (3, 14, 14) and x.abs().max() < 0.01  # the ImageNet mean colour normalises to ~0
    assert image_key(path) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_bad_images_name_the_file_unless_skipped(tiny_dir, tmp_path):
    enc = load_encoder(params(tiny_dir), "cpu")
    good = images(tmp_path / "imgs", 2)
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a png at all")
    missing = tmp_path / "missing.png"
    with refuses(f"{bad}: ", "UnidentifiedImageError", "dino_features.skip_bad_images"):
        encode_images([good[0], bad], params(tiny_dir), enc, tmp_path / "cache")
    with refuses(f"{missing}: ", "FileNotFoundError", "dino_features.skip_bad_images"):
        encode_images([good[0], missing], params(tiny_dir), enc, tmp_path / "cache")
    feats, info = encode_images(
        [good[0], bad, good[1], missing], params(tiny_dir, skip_bad_images=True), enc, tmp_path / "cache"
    )
    assert feats.shape == (2, 4, 32) and info["kept"] == [0, 2]
    assert info["skipped"] == [str(bad), str(missing)]
    with refuses("dino_features: ", "1 images"):
        encode_images([bad], params(tiny_dir, skip_bad_images=True), enc, tmp_path / "cache")


# pool_grid 0 keeps every patch and seed 0 is a seed; an image holds one DINOv2 patch at least; batch_size counts images
@pytest.mark.parametrize("key, low", [("seed", 0), ("image_size", PATCH), ("pool_grid", 0), ("batch_size", 1)])
def test_validate_takes_each_lower_bound_and_names_the_key_one_below(key, low):
    EncoderParams(**{"pool_grid": 0, key: low}).validate("grounding_images")  # the bound itself passes
    with refuses_key(f"grounding_images.{key}", low - 1):
        EncoderParams(**{"pool_grid": 0, key: low - 1}).validate("grounding_images")


@pytest.mark.parametrize(
    "name, local_dir, ok",
    [
        ("facebook/dinov2-small", "", True),  # the default: a model name alone
        ("", "data/user/dinov2", True),  # a directory alone
        ("facebook/dinov2-small", "data/user/dinov2", True),  # both: the directory wins later
        ("", "", False),  # neither: nothing to load
    ],
)
def test_validate_needs_a_model_name_or_a_local_dir(name, local_dir, ok):
    p = EncoderParams(name=name, local_dir=local_dir)
    if ok:
        p.validate("grounding_images")
        return
    with refuses("grounding_images.local_dir") as e:
        p.validate("grounding_images")
    assert key_of(str(e.value)) == "grounding_images.name"


def test_the_paper_profile_needs_pretrained_weights_and_says_where(tmp_path, monkeypatch):
    import yaml

    profile = yaml.safe_load((Path(__file__).parents[2] / "profiles" / "paper.yaml").read_text())["dino_features"]
    assert profile["allow_random_init"] is False
    monkeypatch.chdir(tmp_path)  # data/user/dinov2 does not exist here
    with refuses("dino_features: ", "facebook/dinov2-small", "data/user/dinov2: ", "dino_features.local_dir"):
        load_encoder(EncoderParams(**profile), "cpu")


# --- image loading and pooling at values derived by hand (asymmetric, multi-colour, non-square) ---


def by_hand(pixels: np.ndarray) -> torch.Tensor:
    """(H, W, 3) uint8 -> (3, H, W): [0, 1] then the ImageNet statistics, channel by channel."""
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    return torch.tensor(np.stack([(pixels[..., c] / 255.0 - mean[c]) / std[c] for c in range(3)]), dtype=torch.float32)


def test_load_image_at_its_own_size_is_the_normalised_pixels(tmp_path):
    # No resampling at the target size: every value follows from the pixels, so a swapped channel
    # order, a transposed layout or another normalisation changes numbers.
    pixels = np.random.default_rng(5).integers(0, 256, (12, 12, 3), dtype=np.uint8)
    path = tmp_path / "noise.png"
    Image.fromarray(pixels).save(path)
    torch.testing.assert_close(load_image(path, 12), by_hand(pixels), atol=1e-5, rtol=0)


def test_load_image_keeps_up_down_left_right_and_colour_of_a_non_square_image(tmp_path):
    # 40 wide x 16 tall: left half red over blue (top/bottom), right half green; the square
    # resize squeezes the width, nothing may move across halves.
    pixels = np.zeros((16, 40, 3), dtype=np.uint8)
    pixels[:8, :20] = (255, 0, 0)
    pixels[8:, :20] = (0, 0, 255)
    pixels[:, 20:] = (0, 255, 0)
    path = tmp_path / "flags.png"
    Image.fromarray(pixels).save(path)
    x = load_image(path, 8)
    assert x.shape == (3, 8, 8)
    red, green, blue = (
        by_hand(np.array([[c]], dtype=np.uint8))[:, 0, 0] for c in [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
    )
    # Away from the edges between regions bicubic reproduces flat colour exactly (up to rounding to 8 bits).
    torch.testing.assert_close(x[:, 1, 1], red, atol=1e-5, rtol=0)
    torch.testing.assert_close(x[:, 6, 1], blue, atol=1e-5, rtol=0)
    torch.testing.assert_close(x[:, 1, 6], green, atol=1e-5, rtol=0)
    torch.testing.assert_close(x[:, 6, 6], green, atol=1e-5, rtol=0)


def test_load_image_resamples_bicubic_and_converts_modes(tmp_path):
    pixels = np.random.default_rng(6).integers(0, 256, (9, 15, 3), dtype=np.uint8)
    rgb = Image.fromarray(pixels)
    rgb.save(tmp_path / "a.png")
    want = by_hand(np.asarray(rgb.resize((7, 7), Image.Resampling.BICUBIC)))
    torch.testing.assert_close(load_image(tmp_path / "a.png", 7), want, atol=1e-5, rtol=0)
    nearest = by_hand(np.asarray(rgb.resize((7, 7), Image.Resampling.NEAREST)))
    assert (load_image(tmp_path / "a.png", 7) - nearest).abs().max() > 0.05  # the fixture tells methods apart
    # A grey-level image gives three equal raw channels; an RGBA one drops alpha.
    Image.fromarray(np.full((5, 5), 200, dtype=np.uint8), mode="L").save(tmp_path / "g.png")
    torch.testing.assert_close(load_image(tmp_path / "g.png", 5), by_hand(np.full((5, 5, 3), 200, np.uint8)))
    rgba = np.dstack([pixels[:5, :5], np.full((5, 5), 7, np.uint8)])
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "t.png")
    torch.testing.assert_close(load_image(tmp_path / "t.png", 5), by_hand(pixels[:5, :5]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("pool_grid", [1, 2, 3, 4])
def test_pool_patches_against_loops_over_the_row_major_grid(pool_grid):
    # 4x4 grid, patch i at row i // 4, column i % 4; every patch distinct. Adaptive pooling's
    # bins: rows floor(r g / p) .. ceil((r + 1) g / p).
    g, d = 4, 3
    patches = torch.arange(2 * g * g * d, dtype=torch.float32).reshape(2, g * g, d) ** 1.5
    got = dino.pool_patches(patches, pool_grid)
    assert got.shape == (2, pool_grid**2, d)
    for r in range(pool_grid):
        for c in range(pool_grid):
            rows = range(r * g // pool_grid, -(-(r + 1) * g // pool_grid))
            cols = range(c * g // pool_grid, -(-(c + 1) * g // pool_grid))
            idx = [i * g + j for i in rows for j in cols]
            torch.testing.assert_close(got[:, r * pool_grid + c], patches[:, idx].mean(1))
    assert dino.pool_patches(patches, 0) is patches


def test_encode_batch_drops_only_the_cls_token(tiny_dir):
    enc = load_encoder(params(tiny_dir), "cpu")
    x = torch.randn(2, 3, SIZE, SIZE)
    with torch.no_grad():
        hidden = enc.model(pixel_values=x).last_hidden_state
    torch.testing.assert_close(encode_batch(enc, x, 0), hidden[:, 1:])


def test_encoded_images_are_the_loaded_images_in_path_order(tiny_dir, tmp_path):
    # Distinct images, one repeated: each row is its own image's features, padded batches or not.
    paths = images(tmp_path / "img", 3)
    paths = [paths[2], paths[0], paths[1], paths[0]]
    p = params(tiny_dir, batch_size=4)
    enc = load_encoder(p, "cpu")
    feats, info = encode_images(paths, p, enc, tmp_path / "cache")
    direct = encode_batch(enc, torch.stack([load_image(q, SIZE) for q in paths]), p.pool_grid)
    torch.testing.assert_close(feats, direct, atol=1e-5, rtol=1e-5)
    assert info["kept"] == [0, 1, 2, 3] and info["n_encoded"] == 3


# --- values the mutation run showed unchecked: ids, cache layout, batch shapes, texts, progress bar ---


def digest_of(d: Path, label: str) -> str:
    """The encoder id by hand: each of config.json then the sorted safetensors as 'name:sha256\\n'."""
    h = hashlib.sha256()
    for f in [d / "config.json", *sorted(d.glob("*.safetensors"))]:
        h.update(f"{f.name}:{hashlib.sha256(f.read_bytes()).hexdigest()}\n".encode())
    return f"{label}@{h.hexdigest()[:12]}"


def test_the_pretrained_id_is_the_label_and_12_hex_of_the_bytes(tiny_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    enc = dino.load_pretrained(tiny_dir, "my-dino")
    assert enc.encoder_id == digest_of(tiny_dir, "my-dino") and re.fullmatch(r"my-dino@[0-9a-f]{12}", enc.encoder_id)
    assert load_encoder(params(tiny_dir), "cpu").encoder_id == digest_of(tiny_dir, "facebook/dinov2-small")
    changed = Path(shutil.copytree(tiny_dir, tmp_path / "changed"))
    (weights,) = changed.glob("*.safetensors")
    state = load_file(weights)
    name = sorted(state)[0]
    state[name] = state[name].clone()
    state[name].view(-1)[0] += 1.0  # one weight changed
    save_file(state, str(weights), metadata={"format": "pt"})
    other = dino.load_pretrained(changed, "my-dino")
    assert other.encoder_id == digest_of(changed, "my-dino") != enc.encoder_id
    assert other.model.state_dict()[name].view(-1)[0] == enc.model.state_dict()[name].view(-1)[0] + 1.0


def test_the_weights_are_read_offline_as_float32_safetensors(tiny_dir, monkeypatch):
    from transformers import Dinov2Model

    calls = []
    real = Dinov2Model.from_pretrained.__func__

    def spy(cls, path, *args, **kwargs):
        calls.append((path, args, kwargs))
        return real(cls, path, *args, **kwargs)

    monkeypatch.setattr(Dinov2Model, "from_pretrained", classmethod(spy))
    enc = dino.load_pretrained(tiny_dir, "x")
    [(path, args, kwargs)] = calls
    assert path == tiny_dir and args == ()
    assert kwargs.items() >= {"local_files_only": True, "dtype": torch.float32, "use_safetensors": True}.items()
    assert {p.dtype for p in enc.model.parameters()} == {torch.float32}


@pytest.mark.parametrize(
    "content,error",
    [
        (b"{not json", "JSONDecodeError"),
        (b'{"model_type": "dinov2\xff"}', "UnicodeDecodeError"),
        (b"[1]", "AttributeError"),
    ],
)
def test_an_unreadable_config_is_named_with_the_error(tmp_path, content, error):
    (tmp_path / "config.json").write_bytes(content)
    with refuses(f"{tmp_path / 'config.json'}: ", f"({error})"):
        dino.load_pretrained(tmp_path, "x")


def set_config(**values):
    def edit(d: Path) -> None:
        config = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**config, **values}))

    return edit


@pytest.mark.parametrize(
    "damage, at_fault, named",
    [
        (lambda d: (d / "model.safetensors").write_bytes(b"0123456789"), "model.safetensors", ["SafetensorError"]),
        (lambda d: truncate_file(d / "model.safetensors", 100), "model.safetensors", ["SafetensorError"]),
        (set_config(hidden_size="big"), "config.json", ["hidden_size", "'big'"]),
        (set_config(num_attention_heads=0), "config.json", ["ZeroDivisionError"]),
        (set_config(hidden_act="nope"), "config.json", ["hidden_act", "'nope'"]),
        (set_config(hidden_size=64), "config.json", ["model.safetensors", "[1, 1, 32]", "[1, 1, 64]"]),
        (lambda d: (d / "model.safetensors").rename(d / "dino.safetensors"), "", ["model.safetensors"]),
    ],
)
def test_a_local_dir_with_broken_files_is_one_line_naming_the_file(damage, at_fault, named, tiny_dir, tmp_path):
    d = shutil.copytree(tiny_dir, tmp_path / "dino")
    damage(d)
    with refuses(f"{d / at_fault if at_fault else d}: ", *named):
        load_encoder(params(d), "cpu")


def truncate_file(path: Path, cut: int) -> None:
    path.write_bytes(path.read_bytes()[:-cut])  # a valid header, its tensors' bytes short


def test_weights_missing_from_the_safetensors_are_named_in_one_warning(tiny_dir, tmp_path):
    from safetensors.torch import load_file

    d = shutil.copytree(tiny_dir, tmp_path / "dino")
    weights = load_file(d / "model.safetensors")
    save_file({k: v for k, v in weights.items() if k != "layernorm.bias"}, d / "model.safetensors")
    with pytest.warns(UserWarning) as seen:
        assert load_encoder(params(d), "cpu").pretrained
    assert_names(str(seen[0].message), d, "layernorm.bias")


def test_a_pickled_bin_checkpoint_is_named_as_not_read(tiny_dir, tmp_path):
    """Only safetensors are read (a .bin is a pickle, which can run code): said, not silently passed over."""
    d = tmp_path / "dino"
    d.mkdir()
    shutil.copy(tiny_dir / "config.json", d)
    (d / "pytorch_model.bin").write_bytes(b"a pickle")
    with refuses(d / "pytorch_model.bin", "safetensors", "dino_features.local_dir"):
        load_encoder(params(d), "cpu")
    with pytest.warns(UserWarning) as seen:
        enc = load_encoder(params(d, allow_random_init=True, name="facebook/dinov2-small"), "cpu")
    assert not enc.pretrained
    assert_names(str(seen[0].message), d / "pytorch_model.bin", "safetensors")


def test_load_image_names_a_missing_file(tmp_path):
    with refuses(f"{tmp_path / 'gone.png'}: ", "not found"):
        load_image(tmp_path / "gone.png", 8)


def test_the_cache_directory_is_16_hex_of_the_encoder_and_preprocessing(tiny_dir, tmp_path):
    enc = load_encoder(params(tiny_dir), "cpu")
    encode_images(images(tmp_path / "imgs", 1), params(tiny_dir, batch_size=3), enc, tmp_path / "cache")
    want = hashlib.sha256(f"{enc.encoder_id}|{SIZE}|2|3|exif-upright".encode()).hexdigest()[:16]
    assert [d.name for d in (tmp_path / "cache").iterdir()] == [want]


def test_each_cache_file_carries_the_encoder_and_preprocessing(tiny_dir, tmp_path):
    from safetensors import safe_open

    enc = load_encoder(params(tiny_dir), "cpu")
    encode_images(images(tmp_path / "imgs", 1), params(tiny_dir), enc, tmp_path / "cache")
    (f,) = (tmp_path / "cache").rglob("*.safetensors")
    with safe_open(str(f), "pt") as s:
        assert s.metadata() == {"dino": f'{{"encoder_id": "{enc.encoder_id}", "image_size": {SIZE}, "pool_grid": 2}}'}


@pytest.mark.parametrize("batch_size,shapes", [(1, [1, 1, 1]), (2, [2, 2]), (3, [3]), (4, [4])])
def test_every_batch_is_padded_to_batch_size_with_blank_images(tiny_dir, tmp_path, monkeypatch, batch_size, shapes):
    # Three distinct images and a duplicate, out of file order: batch_size 1, 2 (a last batch of one),
    # exactly 3, and one more than the images.
    made = images(tmp_path / "imgs", 3)
    paths = [made[2], made[0], made[2], made[1]]
    p = params(tiny_dir, batch_size=batch_size)
    enc = load_encoder(p, "cpu")
    batches = []
    real = dino.encode_batch

    def spy(encoder, batch, pool_grid, where="dino_features"):
        batches.append(batch.clone())
        return real(encoder, batch, pool_grid, where)

    monkeypatch.setattr(dino, "encode_batch", spy)
    feats, info = encode_images(paths, p, enc, tmp_path / "cache")
    assert [b.shape[0] for b in batches] == shapes
    loaded = [load_image(q, SIZE) for q in (made[2], made[0], made[1])]  # first occurrences, in paths order
    rows = [row for b, n in zip(batches, [min(batch_size, 3 - i) for i in range(0, 3, batch_size)]) for row in b[:n]]
    assert all(torch.equal(r, x) for r, x in zip(rows, loaded, strict=True))
    pads = [b[min(batch_size, 3 - i) :] for b, i in zip(batches, range(0, 3, batch_size))]
    assert [len(x) for x in pads] == [s - min(batch_size, 3 - i) for s, i in zip(shapes, range(0, 3, batch_size))]
    assert all(torch.equal(x, torch.zeros_like(x)) for x in pads)
    direct = real(enc, torch.stack([load_image(q, SIZE) for q in paths]), 2)
    torch.testing.assert_close(feats, direct, atol=1e-5, rtol=1e-5)
    assert (info["n_encoded"], info["n_cached"], info["skipped"], info["kept"]) == (3, 0, [], [0, 1, 2, 3])


def test_counts_with_a_cache_hit_a_duplicate_and_a_skipped_image(tiny_dir, tmp_path):
    enc = load_encoder(params(tiny_dir), "cpu")
    a, b, c = images(tmp_path / "imgs", 3)
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a png")
    p = params(tiny_dir, skip_bad_images=True)
    first, _ = encode_images([a], p, enc, tmp_path / "cache")
    feats, info = encode_images([b, bad, a, c, b], p, enc, tmp_path / "cache")
    assert (info["n_encoded"], info["n_cached"], info["skipped"], info["kept"]) == (2, 1, [str(bad)], [0, 2, 3, 4])
    assert torch.equal(feats[1], first[0]) and torch.equal(feats[0], feats[3])
    alone = torch.cat([encode_batch(enc, load_image(q, SIZE)[None], 2) for q in (b, a, c, b)])
    torch.testing.assert_close(feats, alone, atol=1e-5, rtol=1e-5)


def test_error_texts_name_the_config_key(tiny_dir, tmp_path):
    enc = load_encoder(params(tiny_dir), "cpu")
    (good,) = images(tmp_path / "imgs", 1)
    bad, missing = tmp_path / "bad.png", tmp_path / "missing.png"
    bad.write_bytes(b"not a png")
    skip = "grounding_images.skip_bad_images: true"  # the key and value that would leave the image out
    with refuses(f"{missing}: ", "FileNotFoundError", skip) as e:
        encode_images([good, missing], params(tiny_dir), enc, tmp_path / "cache", where="grounding_images")
    assert str(e.value).startswith(f"{missing}: ")
    with refuses(f"{bad}: ", "UnidentifiedImageError", skip) as e:
        encode_images([good, bad], params(tiny_dir), enc, tmp_path / "cache", where="grounding_images")
    assert str(e.value).startswith(f"{bad}: ")
    with refuses(f"{bad}: ", "dino_features.skip_bad_images: true"):
        encode_images([bad], params(tiny_dir), enc, tmp_path / "cache")
    with refuses("2 images") as e:
        encode_images([bad, missing], params(tiny_dir, skip_bad_images=True), enc, tmp_path / "cache")
    assert key_of(str(e.value)) == "dino_features"
    with refuses(5, "4x4", "image_size") as e:
        encode_images([good], params(tiny_dir, pool_grid=5), enc, tmp_path / "cache", where="grounding_images")
    assert key_of(str(e.value)) == "grounding_images.pool_grid"


def truncate(entry, features):
    entry.write_bytes(b"truncated")
    return [f"{entry}: ", "SafetensorError"]


def poison(entry, features):
    poisoned = features.clone()
    poisoned[0, 0] = float("nan")
    save_file({"features": poisoned}, str(entry))
    return [f"{entry}: ", "non-finite"]


@pytest.mark.parametrize("damage", [truncate, poison])
def test_a_damaged_cache_entry_is_encoded_again_with_a_warning_naming_it(tiny_dir, tmp_path, damage):
    enc, p = load_encoder(params(tiny_dir), "cpu"), params(tiny_dir)
    a, b = images(tmp_path / "imgs", 2)
    first, _ = encode_images([a, b], p, enc, tmp_path / "cache")
    entry = tmp_path / "cache" / dino.cache_key(enc.encoder_id, p) / f"{image_key(a)}.safetensors"
    good_bytes = entry.read_bytes()
    named = damage(entry, first[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again, info = encode_images([a, b], p, enc, tmp_path / "cache")
    (w,) = caught
    assert str(w.message).startswith(named[0])
    assert_names(str(w.message), *named)
    assert (info["n_encoded"], info["n_cached"]) == (1, 1) and torch.equal(again, first)
    assert entry.read_bytes() == good_bytes  # overwritten with the same entry


def test_the_progress_bar_counts_new_images_and_stays_silent_on_a_full_cache(tiny_dir, tmp_path, capsys):
    enc, p = load_encoder(params(tiny_dir), "cpu"), params(tiny_dir)
    paths = images(tmp_path / "imgs", 3)
    capsys.readouterr()
    encode_images(paths, p, enc, tmp_path / "cache")
    last = capsys.readouterr().err.strip().split("\r")[-1]
    assert re.fullmatch(r"dino features: 100%\|[^|]*\| 3/3 \[[^\]]*img/s\]", last), last
    encode_images(paths, p, enc, tmp_path / "cache")
    assert capsys.readouterr().err == ""


def test_load_image_converts_a_palette_image(tmp_path):
    pixels = np.array([[0, 1, 2], [2, 1, 0], [1, 1, 2]], dtype=np.uint8)
    img = Image.fromarray(pixels, mode="P")
    img.putpalette([250, 10, 20, 5, 200, 30, 40, 60, 180])
    img.save(tmp_path / "p.png")
    colours = np.array([(250, 10, 20), (5, 200, 30), (40, 60, 180)], dtype=np.uint8)
    torch.testing.assert_close(load_image(tmp_path / "p.png", 3), by_hand(colours[pixels]), atol=1e-5, rtol=0)


def test_load_image_applies_the_exif_orientation(tmp_path):
    pixels = np.zeros((8, 8, 3), dtype=np.uint8)
    pixels[:4] = (255, 0, 0)  # stored: red on top, blue below
    pixels[4:] = (0, 0, 255)
    exif = Image.Exif()
    exif[0x0112] = 3  # orientation: rotate 180 degrees to display
    Image.fromarray(pixels).save(tmp_path / "r.png", exif=exif)
    with Image.open(tmp_path / "r.png") as img:
        assert img.getexif()[0x0112] == 3  # the orientation is stored and readable
    blue = by_hand(np.array([[(0, 0, 255)]], dtype=np.uint8))[:, 0, 0]
    torch.testing.assert_close(load_image(tmp_path / "r.png", 8)[:, 1, 1], blue, atol=1e-5, rtol=0)


def test_the_hf_cache_is_asked_offline_only(empty_hf_cache, monkeypatch):
    # The pipeline never downloads: snapshot_download must be told local_files_only=True (without it,
    # an online machine would fetch the weights; an offline one fails over to the cache, so only the call tells).
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    calls = []

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        raise LocalEntryNotFoundError("not cached")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", spy)
    assert dino.find_weights(EncoderParams(name="facebook/dinov2-base")) == (None, f"the HF cache {empty_hf_cache}")
    assert calls == [(("facebook/dinov2-base",), {"local_files_only": True})]


def test_the_encoder_is_frozen_on_the_cpu_by_default_and_moved_when_asked(tiny_dir):
    enc = load_encoder(params(tiny_dir))
    assert {p.device for p in enc.model.parameters()} == {torch.device("cpu")}
    assert not any(p.requires_grad for p in enc.model.parameters()) and not enc.model.training
    meta = load_encoder(params(tiny_dir), "meta")  # a device this machine has besides the CPU
    assert {p.device.type for p in meta.model.parameters()} == {"meta"}


def test_load_encoder_checks_its_params_under_the_callers_key(tiny_dir):
    with refuses_key("grounding_images.pool_grid", -1):
        load_encoder(params(tiny_dir, pool_grid=-1), where="grounding_images")
    with refuses_key("dino_features.batch_size", 0):
        load_encoder(params(tiny_dir, batch_size=0))


def test_pooling_errors_name_the_callers_key_or_dino_features(tiny_dir):
    patches = torch.zeros(1, 16, 3)
    with refuses(5, "4x4") as e:
        dino.pool_patches(patches, 5)
    assert key_of(str(e.value)) == "dino_features.pool_grid"
    with refuses(5, "4x4") as e:
        encode_batch(load_encoder(params(tiny_dir)), torch.zeros(1, 3, SIZE, SIZE), 5, "visual_lens")
    assert key_of(str(e.value)) == "visual_lens.pool_grid"


def test_the_random_init_warning_names_its_key_and_a_library_line(empty_hf_cache, monkeypatch):
    monkeypatch.setitem(dino.RANDOM_INIT_SHAPES, "facebook/dinov2-small", TINY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_encoder(EncoderParams(allow_random_init=True, seed=3), where="grounding_images")
    (w,) = caught
    assert key_of(str(w.message)) == "grounding_images"
    assert_names(str(w.message), "random-init", "facebook/dinov2-small", "seed 3")
    assert w.category is UserWarning and Path(w.filename) != Path(__file__)  # the library's line, not the caller's
