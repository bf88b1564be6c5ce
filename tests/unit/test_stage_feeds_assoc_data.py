"""What the association study's data stages read and write: the story draw, the corpus source in either
format, the corpus settings, the closed forms of the corpus built, and the run, checkpoint and probes
the word table comes from.

Params are edited away from the tiny profile's (another seed, sizes, paths of their own), the source is
a corpus of the test's own or the real CHILDES transcript, and runs of both layer counts and two seeds
hold checkpoints of distinct weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import SHARED_DATA
from feeds import ran, save_run, spy, workspace
from refusals import assert_names

from emergence.core.chat import speech_documents
from emergence.core.train.checkpoint import load_checkpoint
from emergence.studies.assoc import compare as compare_lib
from emergence.studies.assoc.corpus import CorpusParams, build_corpus, load_corpus, read_text_documents
from emergence.studies.assoc.stories import StoryConfig, generate_stories, write_stories
from emergence.studies.assoc.theory import basis_summary, compute_basis, load_basis
from stages.assoc import basis, corpus, stories, words

EVE = SHARED_DATA / "childes" / "Brown-Eve-010600a.cha"
CORPUS = {"vocab_size": 150, "seq_len": 7, "max_sequences": 50, "sequences": "windows", "min_count": 8}
SOURCE = "data/assoc/source"  # a folder of two .txt files, not the stories stage's output
SEED = 3
EDITS = {
    "assoc_corpus": CORPUS,
    "assoc_runs": {"seeds": [0, 1, SEED]},  # seed 1 has no run folder
    "paths": {"assoc_source": SOURCE},
    "assoc_words": {"probes": ["the", "."]},
}
STEPS = [0, 2, 5, 9]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A source folder of generated stories (not the tiny draw), its corpus and basis, and runs
    L1_seed3, L2_seed0, L2_seed3 of distinct weights."""
    root = tmp_path_factory.mktemp("assoc_data")
    docs = generate_stories(StoryConfig(n_stories=90, seed=7))
    write_stories(docs[:40], root / SOURCE / "a.txt")
    write_stories(docs[40:], root / SOURCE / "b" / "c.txt")
    with pytest.MonkeyPatch.context() as mp:
        workspace(root, mp, EDITS)
        assert corpus.main([]) == 0 and basis.main([]) == 0
    built = load_corpus(root / "data/assoc/corpus.safetensors")
    for run in ("L1_seed3", "L2_seed0", "L2_seed3"):
        config = {"n_layers": int(run[1]), "d_vocab": len(built.vocab), "n_ctx": built.seq_len}
        save_run(root / "data/assoc/runs" / run, STEPS, "attn_only", config)
    return root


@pytest.fixture
def project(built, tmp_path, monkeypatch):
    shutil.copytree(built / "data", tmp_path / "data")
    return lambda **edits: workspace(tmp_path, monkeypatch, {**EDITS, **edits})


def same_corpus(got, want) -> None:
    assert got.vocab == want.vocab and np.array_equal(got.sequences, want.sequences)
    for name in ("tokenizer", "n_documents", "n_tokens", "n_types", "coverage", "n_windows"):
        assert getattr(got, name) == getattr(want, name), name


def test_stories_writes_the_configured_draw_to_its_own_path(tmp_path, monkeypatch, capsys):
    cfg = {"n_stories": 23, "seed": 5, "frames": 2, "lexicon": 4}
    workspace(tmp_path, monkeypatch, {"assoc_stories": cfg, "paths": {"assoc_stories": "data/assoc/mine.txt"}})
    ran(stories.main, [], capsys)
    write_stories(generate_stories(StoryConfig(**cfg)), tmp_path / "want.txt")
    assert Path("data/assoc/mine.txt").read_text() == (tmp_path / "want.txt").read_text()
    assert not Path("data/assoc/stories.txt").exists()


def test_corpus_tokenises_the_text_source_with_the_corpus_settings(project, capsys):
    project()
    ran(corpus.main, [], capsys)
    want = build_corpus(read_text_documents(SOURCE), CorpusParams(format="text", **CORPUS), SOURCE)
    assert want.n_documents == 90 and len(want.sequences) == 50  # both files read; max_sequences cuts
    got = load_corpus("data/assoc/corpus.safetensors")
    same_corpus(got, want)
    summary = json.loads(Path("reports/metrics/assoc_corpus.json").read_text())
    assert summary == {
        "source": SOURCE,
        "format": "text",
        "tokenizer": "word",
        "sequences": "windows",
        "min_count": 8,
        "vocab_size": len(want.vocab),
        "seq_len": 7,
        "n_sequences": 50,
        "n_documents": 90,
        "n_tokens": want.n_tokens,
        "n_types": want.n_types,
        "coverage": round(want.coverage, 6),
        "n_windows": want.n_windows,
    }
    assert len(want.vocab) < CORPUS["vocab_size"]  # min_count leaves fewer types than asked for


def test_corpus_reads_the_speech_of_a_chat_transcript(project, capsys, shared_data):
    project(
        assoc_corpus={**CORPUS, "format": "chat"}, paths={"assoc_source": str(EVE)}, assoc_words={"probes": ["you"]}
    )
    ran(corpus.main, [], capsys)
    want = build_corpus(speech_documents(EVE), CorpusParams(format="chat", **CORPUS), str(EVE))
    same_corpus(load_corpus("data/assoc/corpus.safetensors"), want)
    summary = json.loads(Path("reports/metrics/assoc_corpus.json").read_text())
    assert (summary["format"], summary["source"], summary["n_documents"]) == ("chat", str(EVE), 1)


def test_corpus_refuses_a_probe_word_its_vocabulary_lacks(project, capsys):
    project(assoc_words={"probes": ["the", "zyzzyva"]})
    assert corpus.main([]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert_names(line, "assoc_words.probes", "zyzzyva", SOURCE)
    assert "'the'" not in line


def test_basis_holds_the_closed_forms_of_the_corpus_built(project, capsys):
    project(paths={"assoc_basis": "data/assoc/mine.safetensors"})
    ran(basis.main, [], capsys)
    built = load_corpus("data/assoc/corpus.safetensors")
    want = compute_basis(built.sequences, len(built.vocab))
    got = load_basis("data/assoc/mine.safetensors")
    assert set(got.tensors()) == set(want.tensors())
    assert all(torch.allclose(got.tensors()[k], t) for k, t in want.tensors().items())
    pd.testing.assert_frame_equal(pd.read_parquet("data/assoc/basis_summary.parquet"), basis_summary(want))


def test_words_reads_the_named_checkpoint_of_the_named_run_and_the_corpus_basis(project, monkeypatch, capsys):
    project(assoc_words={"n_layers": 2, "seed": SEED, "checkpoint": "step5", "top_k": 4, "probes": [".", "the"]})
    table = spy(monkeypatch, words, "top_associations", compare_lib.top_associations)
    ran(words.main, [], capsys)
    (matrices, vocab, probes, k, where), _ = table.one
    assert vocab == load_corpus("data/assoc/corpus.safetensors").vocab
    assert (probes, k, where) == ([".", "the"], 4, "assoc_words.probes")
    model = load_checkpoint(f"data/assoc/runs/L2_seed{SEED}/step5")[0]
    want = compare_lib.theory_matrices(load_basis("data/assoc/basis.safetensors")) | compare_lib.learned_matrices(model)
    assert set(matrices) == set(want) and "V1 (learned)" in want
    assert all(torch.equal(matrices[k], t) for k, t in want.items())
    pd.testing.assert_frame_equal(pd.read_parquet("data/assoc/words.parquet"), table.returned[0])


@pytest.mark.parametrize("edit, named", [({"seed": 1}, ["assoc_words", "data/assoc/runs/L2_seed1"])])
def test_words_refuses_a_run_that_was_not_trained(edit, named, project, capsys):
    project(assoc_words={"n_layers": 2, **edit})
    assert words.main([]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert_names(line, *named)
    assert not Path("data/assoc/words.parquet").exists()


def test_words_refuses_more_top_tokens_than_the_corpus_has_types(project, capsys):
    project(assoc_words={"n_layers": 1, "seed": SEED, "top_k": 140})
    n_types = len(load_corpus("data/assoc/corpus.safetensors").vocab)
    assert n_types < 140 <= CORPUS["vocab_size"]
    assert words.main([]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert_names(line, "assoc_words.top_k", 140, n_types, "data/assoc/corpus.safetensors")


def test_words_ranks_every_type_when_top_k_is_the_number_of_types(project, capsys):
    project()
    vocab = load_corpus("data/assoc/corpus.safetensors").vocab
    project(assoc_words={"n_layers": 1, "seed": SEED, "top_k": len(vocab), "probes": ["the"]})
    ran(words.main, [], capsys)
    table = pd.read_parquet("data/assoc/words.parquet")
    assert all(sorted(rows["token"]) == sorted(vocab) for _, rows in table.groupby("matrix"))
