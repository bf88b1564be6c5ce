"""Property: every reader of outside data or of an upstream artifact, given a damaged file, either
reads it or raises the project's one-line error naming the file; never another exception.

Damage: truncation at any offset, flipped bytes, deleted or repeated lines, arbitrary bytes, applied
to real inputs (the Eve transcript, the VisDial sample) and to artifacts the pipeline writes.
Derandomised and bounded, so the suite is reproducible and takes seconds; an input that once broke a
reader stays as an @example below.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import ROOT
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from emergence.core.config import read_params
from emergence.core.io import PipelineError, write_parquet
from emergence.core.train.checkpoint import load_checkpoint, save_checkpoint
from emergence.studies.assoc.corpus import Corpus, load_corpus, read_text_documents, save_corpus
from emergence.studies.assoc.theory import load_basis
from emergence.studies.binding.program_io import load_programs
from emergence.studies.grounding.childes import extract_turns
from emergence.studies.grounding.nouns import read_nouns
from emergence.studies.grounding.templates import read_templates
from emergence.studies.grounding.tokens import read_vocab
from emergence.studies.grounding.visdial import extract_dialogs

PROPERTY = settings(
    max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@st.composite
def damaged(draw, original: bytes) -> bytes:
    """`original` truncated, with bytes flipped, with a line deleted or repeated, or arbitrary bytes."""
    kind = draw(st.sampled_from(["truncate", "flip", "delete_line", "repeat_line", "arbitrary"]))
    if kind == "arbitrary":
        return draw(st.binary(max_size=512))
    if kind == "truncate":
        return original[: draw(st.integers(0, max(len(original) - 1, 0)))]
    if kind == "flip":
        data = bytearray(original)
        for i in draw(st.lists(st.integers(0, max(len(data) - 1, 0)), min_size=1, max_size=8)):
            data[i] = draw(st.integers(0, 255))
        return bytes(data)
    lines = original.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    lines = lines[:i] + lines[i + 1 :] if kind == "delete_line" else lines[: i + 1] + lines[i:]
    return b"\n".join(lines)


def reads_or_names_the_file(read: Callable[[Path], object], path: Path, shown: Path | None = None) -> None:
    """The property: `read(path)` returns, or raises a PipelineError whose message starts with the file
    (or the folder `shown`) it could not read."""
    try:
        read(path)
    except PipelineError as e:
        assert str(e).startswith(str(shown or path)), str(e)
        assert "\n" not in str(e), str(e)


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# --- outside data ---------------------------------------------------------------------------------

PARAMS = (ROOT / "params.yaml").read_bytes()
VISDIAL = json.dumps(
    {
        "version": "1.0",
        "split": "val2018",
        "data": {
            "questions": ["is it red", "how many"],
            "answers": ["yes", "two"],
            "dialogs": [
                {
                    "image_id": 7,
                    "caption": "a red ball on a table",
                    "dialog": [{"question": 0, "answer": 0, "answer_options": [0, 1], "gt_index": 0}],
                }
            ],
        },
    }
).encode()
STORIES = b"Tom had a red ball.<|endoftext|>\nSue saw a big dog. The dog ran.<|endoftext|>"
NOUNS = (ROOT / "resources" / "grounding" / "nouns.tsv").read_bytes()[:1500]
TEMPLATES = (ROOT / "resources" / "grounding" / "templates.tsv").read_bytes()


@PROPERTY
@given(data=damaged(PARAMS))
@example(data=b"\x00 base:\n  seeds: [0]\n")  # once a two-line error (the YAML reader's message)
def test_params(tmp_path, data):
    reads_or_names_the_file(read_params, _write(tmp_path, "params.yaml", data))


@pytest.fixture(scope="module")
def eve(shared_data: Path) -> bytes:
    """The Eve transcript's header and first turns. Read by the tests that use it, not at import: without
    ../shared the suite still collects, and these tests fail with the fixture's one line."""
    return (shared_data / "childes" / "Brown-Eve-010600a.cha").read_bytes()[:6000]


@PROPERTY
@given(data=st.data())
def test_chat_transcript(tmp_path, eve, data):
    reads_or_names_the_file(extract_turns, _write(tmp_path, "eve.cha", data.draw(damaged(eve))))


def test_chat_transcript_without_its_end(tmp_path, eve):
    reads_or_names_the_file(extract_turns, _write(tmp_path, "eve.cha", eve.replace(b"@End", b"")))


@PROPERTY
@given(data=damaged(VISDIAL), image_id=st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=3)))
def test_visdial(tmp_path, data, image_id):
    reads_or_names_the_file(extract_dialogs, _write(tmp_path, "visdial.json", data))
    record = json.loads(VISDIAL)
    record["data"]["dialogs"][0]["image_id"] = image_id
    reads_or_names_the_file(extract_dialogs, _write(tmp_path, "ids.json", json.dumps(record).encode()))


@PROPERTY
@given(data=damaged(STORIES))
def test_text_corpus(tmp_path, data):
    reads_or_names_the_file(read_text_documents, _write(tmp_path, "stories.txt", data))


@PROPERTY
@given(nouns=damaged(NOUNS), templates=damaged(TEMPLATES))
def test_noun_list_and_templates(tmp_path, nouns, templates):
    reads_or_names_the_file(read_nouns, _write(tmp_path, "nouns.tsv", nouns))
    reads_or_names_the_file(read_templates, _write(tmp_path, "templates.tsv", templates))


# --- upstream artifacts ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, bytes]:
    """Small genuine artifacts, as the stages write them."""
    d = tmp_path_factory.mktemp("artifacts")
    from emergence.studies.binding.program_io import PROGRAM_COLUMNS

    programs = pd.DataFrame(
        {
            c: ([1, 2] if k == "i" else ["a=1\n#a:", "b=2\n#b:"] if k == "OU" else [[0], [0]])
            for c, k in PROGRAM_COLUMNS.items()
        }
    )
    write_parquet(programs, d / "programs.parquet")
    corpus = Corpus(["a", "b"], np.array([[0, 1, 0]], dtype=np.int32), "word", 1, 3, 2, 1.0, 1)
    save_corpus(corpus, d / "corpus.safetensors")
    save_file(
        {n: torch.zeros(2, 2) for n in ("B", "Phi", "Sigma_B", "G", "Q")} | {"Delta": torch.zeros(2)},
        str(d / "basis.safetensors"),
    )
    (d / "vocab.json").write_text(
        json.dumps({"targets": ["ball"], "vocab": ["<unk>", "ball<ENV>"], "env_marking": "targets"})
    )
    return {p.name: p.read_bytes() for p in d.iterdir()}


@PROPERTY
@given(seed=st.integers(0, 2**16), kind=st.sampled_from(["truncate", "flip", "arbitrary"]))
def test_artifacts(tmp_path, artifacts, seed, kind):
    rng = np.random.default_rng(seed)
    readers = {
        "programs.parquet": load_programs,
        "corpus.safetensors": load_corpus,
        "basis.safetensors": load_basis,
        "vocab.json": read_vocab,
    }
    for name, read in readers.items():
        data = bytearray(artifacts[name])
        if kind == "truncate":
            data = data[: rng.integers(0, len(data))]
        elif kind == "flip":
            for i in rng.integers(0, len(data), size=4):
                data[i] = rng.integers(0, 256)
        else:
            data = bytearray(rng.integers(0, 256, size=rng.integers(0, 300)).astype(np.uint8).tobytes())
        reads_or_names_the_file(read, _write(tmp_path, name, bytes(data)))


@PROPERTY
@given(seed=st.integers(0, 2**16), target=st.sampled_from(["model.safetensors", "config.json"]))
def test_checkpoint(tmp_path, seed, target):
    from tiny_models import tiny

    step_dir = save_checkpoint(tiny(), tmp_path / "run", 3, {})
    path = step_dir / target
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(seed)
    cut = rng.integers(0, len(data))
    data = data[:cut] if seed % 2 else data
    for i in rng.integers(0, max(len(data), 1), size=3 if len(data) else 0):
        data[i] = rng.integers(0, 256)
    path.write_bytes(bytes(data))
    reads_or_names_the_file(load_checkpoint, step_dir, shown=step_dir)


def damage(data: bytes, seed: int, kind: str) -> bytes:
    """`data` cut at a random offset, with 1-4 random bytes overwritten, or replaced by random bytes."""
    rng = np.random.default_rng(seed)
    out = bytearray(data)
    if kind == "truncate":
        out = out[: rng.integers(0, len(out))]
    elif kind == "flip":
        for i in rng.integers(0, len(out), size=rng.integers(1, 5)):
            out[i] = rng.integers(0, 256)
    else:
        out = bytearray(rng.integers(0, 256, size=rng.integers(0, 300)).astype(np.uint8).tobytes())
    return bytes(out)


KINDS = st.sampled_from(["truncate", "flip", "arbitrary"])


def no_new_files(folder: Path, before: set[Path]) -> None:
    """A reader never writes: the folder holds exactly what the test put there."""
    assert set(folder.rglob("*")) == before


@PROPERTY
@given(seed=st.integers(0, 2**16), kind=KINDS, target=st.sampled_from(["features.safetensors", "encoder.json"]))
def test_features(tmp_path, seed, kind, target):
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # one folder per example
    from emergence.studies.grounding.visual_inputs import features

    root = tmp_path / "features"
    root.mkdir()
    save_file({"features": torch.arange(24.0).reshape(2, 3, 4)}, str(root / "features.safetensors"))
    (root / "encoder.json").write_text(json.dumps({"encoder_id": "dinov2-small", "pretrained": True}))
    write_parquet(pd.DataFrame({"row": [0, 1], "image_id": [7, 9]}), root / "images.parquet")
    (root / target).write_bytes(damage((root / target).read_bytes(), seed, kind))
    before = set(tmp_path.rglob("*"))
    reads_or_names_the_file(lambda _: features({"paths": {"visual_features": str(root)}}), root)
    no_new_files(tmp_path, before)


@PROPERTY
@given(seed=st.integers(0, 2**16), kind=KINDS)
def test_feature_cache_entry(tmp_path, seed, kind):
    """A cache entry is no artifact: damaged, it reads as the features it held or as None (encode again)."""
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # one folder per example
    import warnings

    from emergence.studies.grounding.dino_features import cached_features

    feats = torch.arange(12.0).reshape(3, 4)
    path = tmp_path / "entry.safetensors"
    save_file({"features": feats}, str(path), metadata={"dino": "{}"})
    path.write_bytes(damage(path.read_bytes(), seed, kind))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = cached_features(path)
    assert got is None or got.shape == feats.shape


@PROPERTY
@given(seed=st.integers(0, 2**16), kind=KINDS, target=st.sampled_from(["state.safetensors", "state.json"]))
@example(seed=13, kind="flip", target="state.safetensors")  # once left the weights half-restored
@example(seed=1414, kind="flip", target="state.json")  # once an OverflowError (a negative RNG state word)
def test_resume_state(tmp_path, seed, kind, target):
    """Damaged resume state resumes or starts fresh; starting fresh leaves the model, the optimizer and
    the random generators exactly as they were (not half-restored)."""
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # one folder per example
    from tiny_models import tiny

    from emergence.core.train.checkpoint import load_resume_state, save_resume_state

    model = tiny(seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.tensor([[1, 2]]))[0].sum().backward()
    optimizer.step()
    path = tmp_path / "resume"
    save_resume_state(path, model=model, optimizer=optimizer, step=3, tokens=6, rows=[{"loss": 1.0}], fingerprint="f")
    (path / target).write_bytes(damage((path / target).read_bytes(), seed, kind))
    fresh = tiny(seed=2)
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    weights = {k: v.clone() for k, v in fresh.state_dict().items()}
    optim_state, rng = fresh_optimizer.state_dict(), torch.get_rng_state()
    before = set(tmp_path.rglob("*"))
    resumed = load_resume_state(path, "f", fresh, fresh_optimizer, "cpu")
    no_new_files(tmp_path, before)
    if resumed is None:
        assert all(torch.equal(v, weights[k]) for k, v in fresh.state_dict().items())
        assert fresh_optimizer.state_dict() == optim_state and torch.equal(torch.get_rng_state(), rng)
    else:
        assert isinstance(resumed["step"], int) and isinstance(resumed["tokens"], int)
        assert isinstance(resumed["rows"], list)


@PROPERTY
@given(seed=st.integers(0, 2**16), kind=KINDS)
@example(seed=1199, kind="flip")  # once a UnicodeDecodeError: a flipped byte inside a string column
def test_parquet_table(tmp_path, seed, kind):
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # one folder per example
    from emergence.core.io import read_parquet

    path = tmp_path / "table.parquet"
    write_parquet(pd.DataFrame({"run": ["a", "b"], "step": [1, 2], "gain": [0.5, -1.0], "ok": [True, False]}), path)
    path.write_bytes(damage(path.read_bytes(), seed, kind))
    before = set(tmp_path.rglob("*"))
    reads_or_names_the_file(lambda p: read_parquet(p, {"run": "OU", "step": "i", "gain": "f", "ok": "b"}), path)
    no_new_files(tmp_path, before)
