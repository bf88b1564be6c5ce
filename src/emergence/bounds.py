"""The sizes `python -m emergence check` can bound from params alone (appended to check.CROSS_CHECKS).

An evaluation set larger than the split it is drawn from, a top_k larger than the vocabulary it ranks,
a DINOv2 image size whose activations cannot fit this machine, a probe word the embedded corpus
does not hold: each is a mistake a stage would otherwise meet hours later, or clip without a word.
Each check returns one line per problem naming the key, its value and the bound; a section that does
not load is skipped here (its schema reports it).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image

from emergence.core.config import from_dict, path_of, section, spans
from emergence.core.io import PipelineError
from emergence.core.train.schedule import CheckpointPlan
from emergence.studies.assoc.compare_params import AssocTrainParams, CausalParams, OrderParams
from emergence.studies.assoc.corpus import CorpusParams, WordsParams, build_corpus, missing_probes
from emergence.studies.assoc.stories import StoryConfig, generate_stories
from emergence.studies.binding.ablation_params import BindingAblationParams
from emergence.studies.binding.patching_params import PatchingParams
from emergence.studies.binding.sets import DataParams, split_sizes
from emergence.studies.binding.train_config import train_params
from emergence.studies.binding.trajectory_params import PhaseParams
from emergence.studies.grounding.childes_synth import SynthConfig
from emergence.studies.grounding.encoder_params import RANDOM_INIT_SHAPES, EncoderParams
from emergence.studies.grounding.inputs_params import train_section
from emergence.studies.grounding.lens import GroundingLensParams
from emergence.studies.grounding.scenes import SceneParams


def _loaded(load: Callable[[], Any]) -> Any:
    """`load()`, or None where the section does not load (already one of check's lines)."""
    try:
        return load()
    except PipelineError:
        return None


def _typed(cls: type, params: dict, name: str) -> Any:
    return _loaded(lambda: from_dict(cls, section(params, name), name))


# ---- evaluation sets against the splits binding_data draws ------------------------------------------

SPLITS = ("train", "val", "test")  # binding_data.split's order
EVAL_SETS = (  # (section, key, schema or None for binding_train, split it takes its first programs from)
    ("binding_train", "eval_programs", None, "val"),
    ("binding_trajectory", "n_programs", PhaseParams, "test"),
    ("binding_ablation", "n_programs", BindingAblationParams, "test"),
    ("binding_patching", "n_pairs", PatchingParams, "test"),  # pairs of distinct test programs
)


@spans("binding_data", "binding_train", "binding_trajectory", "binding_ablation", "binding_patching")
def eval_sets_fit_their_splits(params: dict) -> list[str]:
    data = _typed(DataParams, params, "binding_data")
    if data is None:
        return []
    sizes = dict(zip(SPLITS, split_sizes(data.n_programs, data.split)))
    where = f"binding_data.n_programs {data.n_programs} x split {list(data.split)}"
    problems = []
    for name, key, schema, split in EVAL_SETS:
        if schema is None:
            loaded = _loaded(lambda: train_params(params, seed=0, device="cpu"))
            value = None if loaded is None else loaded[1]
        else:
            value = getattr(_typed(schema, params, name), key, None)
        if value is not None and value > sizes[split]:
            problems.append(
                f"{name}.{key}: {value} is more than the {sizes[split]} programs of the {split} split "
                f"({where}); at most {sizes[split]}"
            )
    return problems


# ---- the association study: what it ranks and slices ------------------------------------------------


@spans("assoc_corpus", "assoc_words", "assoc_train", "assoc_order", "assoc_causal")
def assoc_sizes_fit_the_corpus(params: dict) -> list[str]:
    """The study compares positions (seq_len >= 2); top_k ranks the vocabulary (at most
    assoc_corpus.vocab_size types); assoc_train's batches and the first n_sequences assoc_order and
    assoc_causal take come from the corpus (at most max_sequences, when that is set)."""
    corpus, words = _typed(CorpusParams, params, "assoc_corpus"), _typed(WordsParams, params, "assoc_words")
    if corpus is None:
        return []
    problems = []
    if corpus.seq_len < 2:  # a corpus of one-token windows is one, but the study's positional terms need two
        problems.append(
            f"assoc_corpus.seq_len: {corpus.seq_len}: the theory's positional terms (and so every cosine) need "
            "two positions; at least 2"
        )
    if words is not None and words.top_k > corpus.vocab_size:
        problems.append(
            f"assoc_words.top_k: {words.top_k} is more than the vocabulary it ranks "
            f"(assoc_corpus.vocab_size {corpus.vocab_size}); at most {corpus.vocab_size}"
        )
    for name, schema, key in (
        ("assoc_train", AssocTrainParams, "batch_size"),  # the stage refuses a batch larger than the corpus
        ("assoc_order", OrderParams, "n_sequences"),
        ("assoc_causal", CausalParams, "n_sequences"),
    ):
        n = getattr(_typed(schema, params, name), key, 0)
        if corpus.max_sequences and n > corpus.max_sequences:
            problems.append(
                f"{name}.{key}: {n} is more than the corpus holds "
                f"(assoc_corpus.max_sequences {corpus.max_sequences}); at most {corpus.max_sequences}"
            )
    return problems


CHEAP_STORIES = 20_000  # the embedded corpus is generated and tokenised here up to this size (~2 s)


@spans("assoc_corpus", "assoc_words", "assoc_stories")
def probes_in_embedded_corpus(params: dict) -> list[str]:
    """Where assoc_corpus reads the embedded stories, build their vocabulary here (as the stage will)
    and name the probe words it lacks; a user corpus is first read by the assoc_corpus stage."""
    corpus, words = _typed(CorpusParams, params, "assoc_corpus"), _typed(WordsParams, params, "assoc_words")
    stories = _typed(StoryConfig, params, "assoc_stories")
    if corpus is None or words is None or stories is None or corpus.format != "text":
        return []
    source, embedded = (_loaded(lambda key=key: path_of(params, key)) for key in ("assoc_source", "assoc_stories"))
    if source is None or source != embedded or stories.n_stories > CHEAP_STORIES:
        return []
    try:
        vocab = _embedded_vocab(stories, corpus, str(source))
        return missing_probes(vocab, words.probes, f"the embedded stories ({source}, assoc_stories)")
    except PipelineError as e:  # the corpus stage would stop on it too
        return [str(e)]


_VOCABS: dict[str, Any] = {}  # one build per (stories, corpus, source) in a process: check runs again and again


def _embedded_vocab(stories: StoryConfig, corpus: CorpusParams, source: str) -> Any:
    """The vocabulary assoc_corpus builds from the embedded stories; the same sections give the same one
    (the stories are drawn from their seed), so a process that checks params many times builds it once."""
    key = repr((stories, corpus, source))
    if key not in _VOCABS:
        _VOCABS[key] = build_corpus(generate_stories(stories), corpus, source).vocab
    return _VOCABS[key]


# ---- images against this machine's memory and what PIL reads ----------------------------------------------------


def machine_memory() -> int:
    """Bytes of physical memory on this machine."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def encoder_shape(p: EncoderParams) -> dict | None:
    """hidden_size, num_hidden_layers, num_attention_heads, mlp_ratio, patch_size of the encoder:
    from local_dir's config.json, else the published shape of `name`; None when neither is known."""
    config = Path(p.local_dir) / "config.json" if p.local_dir else None
    if config is not None and config.is_file():
        try:
            values = json.loads(config.read_text(encoding="utf-8"))
            return {k: int(values[k]) for k in RANDOM_INIT_SHAPES["facebook/dinov2-small"]}
        except (ValueError, KeyError, TypeError):
            return None  # the stage names an unreadable config
    return RANDOM_INIT_SHAPES.get(p.name)


def dino_batch_bytes(image_size: int, batch_size: int, shape: dict) -> int:
    """Peak float32 bytes of one encoder batch (no gradients): the weights, the batch of pixels (and its
    padded copy), the token activations of one layer (residual, norm, q, k, v, attention output: 6 d;
    MLP: mlp_ratio d) and the attention scores of one head per image (B N^2), as PyTorch's CPU
    scaled-dot-product attention holds them. Measured peaks (dinov2-small, one thread) came within
    -35..+7 % of it at 224 px x 16, 448 x 8 and 896 x 2; eager attention holds all heads' scores."""
    d, layers = shape["hidden_size"], shape["num_hidden_layers"]
    tokens = (image_size // shape["patch_size"]) ** 2 + 1  # the patch grid and CLS
    weights = layers * (4 + 2 * shape["mlp_ratio"]) * d * d
    pixels = 2 * batch_size * 3 * image_size**2
    activations = batch_size * tokens * (6 + shape["mlp_ratio"]) * d
    scores = batch_size * tokens**2
    return 4 * (weights + pixels + activations + scores)


def largest_image(batch_size: int, shape: dict, have: int) -> int:
    """The largest multiple of the patch size whose batch fits in `have` bytes (0: none)."""
    patch, lo, hi = shape["patch_size"], 0, 1
    while dino_batch_bytes(hi * patch, batch_size, shape) <= have:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # fits at lo patches a side, not at hi
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if dino_batch_bytes(mid * patch, batch_size, shape) <= have else (lo, mid)
    return lo * patch


@spans("dino_features")
def dino_fits_memory(params: dict) -> list[str]:
    p = _typed(EncoderParams, params, "dino_features")
    shape = None if p is None else encoder_shape(p)
    if shape is None:
        return []
    need, have = dino_batch_bytes(p.image_size, p.batch_size, shape), machine_memory()
    if need <= have:
        return []
    fits = largest_image(p.batch_size, shape, have)
    return [
        f"dino_features.image_size: {p.image_size} needs about {need / 2**30:,.0f} GiB for one batch of "
        f"{p.batch_size} ({(p.image_size // shape['patch_size']) ** 2} patches of {shape['patch_size']} px, "
        f"width {shape['hidden_size']}), more than this machine's {have / 2**30:,.0f} GiB of RAM; "
        + (f"at most {fits} fits at this batch_size" if fits else "lower batch_size")
    ]


@spans("visual_scenes")
def scenes_are_readable(params: dict) -> list[str]:
    """The embedded scenes are read back through PIL, which refuses (or warns about) an image of more
    than Image.MAX_IMAGE_PIXELS pixels as a decompression bomb."""
    p, cap = _typed(SceneParams, params, "visual_scenes"), Image.MAX_IMAGE_PIXELS
    if p is None or cap is None or p.image_size**2 <= cap:
        return []
    return [
        f"visual_scenes.image_size: {p.image_size} makes images of {p.image_size**2:,} pixels, more than PIL "
        f"reads without a decompression-bomb warning (Image.MAX_IMAGE_PIXELS {cap:,}); at most {math.isqrt(cap)}"
    ]


# Upper estimates of what each generator writes per item, in bytes (measured on the tiny profile's files,
# rounded up): the point is a size off by orders of magnitude (n_images: 1000000000), not the last GB.
STORY_FRAME_BYTES, CHAT_TURN_BYTES, ROUND_BYTES = 1_000, 200, 300


@spans("visual_scenes", "assoc_stories", "childes_synth")
def generated_data_fits_the_disk(params: dict) -> list[str]:
    """The embedded generators write their data before anything trains: a count a few orders too large
    would fill the disk (or memory) for hours before failing, so it is weighed against the free disk."""
    free, problems = shutil.disk_usage(".").free, []
    scenes = _typed(SceneParams, params, "visual_scenes")
    stories = _typed(StoryConfig, params, "assoc_stories")
    synth = _typed(SynthConfig, params, "childes_synth")
    sizes = [
        ("visual_scenes.n_images", scenes, lambda p: p.n_images * (3 * p.image_size**2 + p.rounds * ROUND_BYTES)),
        ("assoc_stories.n_stories", stories, lambda p: p.n_stories * p.frames * STORY_FRAME_BYTES),
        ("childes_synth.n_files", synth, lambda p: p.n_files * p.turns_per_file * CHAT_TURN_BYTES),
    ]
    for key, p, size in sizes:
        if p is not None and (need := size(p)) > free:
            problems.append(
                f"{key}: {getattr(p, key.split('.')[1])} would write about {need / 1e9:,.1f} GB, more than the "
                f"{free / 1e9:,.1f} GB free here (lower it)"
            )
    return problems


@spans("grounding_lens", "grounding_train")
def lens_checkpoints_exist(params: dict) -> list[str]:
    """The tuned lens trains on n_checkpoints of each run: more than a run saves would be clipped to
    what is there without a word."""
    lens = _typed(GroundingLensParams, params, "grounding_lens")
    loaded = _loaded(lambda: train_section(params, "grounding_train"))
    if lens is None or loaded is None:
        return []
    train = loaded[0]
    saved = CheckpointPlan(train.steps, train.dense_until, train.n_log_checkpoints, train.checkpoint_every).count()
    if lens.n_checkpoints <= saved:
        return []
    return [
        f"grounding_lens.n_checkpoints: {lens.n_checkpoints}, more than the {saved} checkpoints a grounding_train "
        "run saves"
    ]


CHECKS = [
    lens_checkpoints_exist,
    generated_data_fits_the_disk,
    eval_sets_fit_their_splits,
    assoc_sizes_fit_the_corpus,
    probes_in_embedded_corpus,
    dino_fits_memory,
    scenes_are_readable,
]
