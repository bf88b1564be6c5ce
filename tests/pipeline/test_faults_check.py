"""Fault cases of `python -m emergence check`, `python -m emergence profile` and the association study's
vocabulary checks, each on a copy of the tiny run (binding val split: 400 x 0.05 = 20 programs; the
tiny corpus: 64 types, 64 sequences, built from the embedded stories)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from faults import assert_only_changed, assert_outcome, fault_copy, run_command, set_params, snapshot


@pytest.fixture
def run(tiny_run, tmp_path) -> Path:
    return fault_copy(tiny_run, tmp_path / "run")


@pytest.mark.parametrize(
    "changes, says",
    [
        (
            dict(binding_train__eval_programs=21),
            "binding_train.eval_programs: 21 is more than the 20 programs of the val split "
            "(binding_data.n_programs 400 x split [0.8, 0.05, 0.15]); at most 20",
        ),
        (
            dict(assoc_words__top_k=65),
            "assoc_words.top_k: 65 is more than the vocabulary it ranks (assoc_corpus.vocab_size 64); at most 64",
        ),
        (dict(dino_features__image_size=5000), "dino_features.image_size: 5000 needs about "),
        (
            dict(assoc_words__probes=["the", "zebra"]),
            "assoc_words.probes: 'zebra' not in the 64-type vocabulary built from the embedded stories",
        ),
    ],
    ids=["eval_programs", "top_k", "image_size", "probes"],
)
def test_check_refuses_sizes_beyond_their_bounds(run, changes, says):
    set_params(run, **changes)
    before = snapshot(run)
    assert_outcome(run_command(run, "python", "-m", "emergence", "check", timeout=120), "error", says)
    assert_only_changed(run, before)


def test_corpus_stage_names_probe_words_missing_from_a_user_corpus(run):
    corpus = run / "data" / "user" / "stories.txt"
    corpus.parent.mkdir(parents=True)
    corpus.write_text("the cat sat on the mat and the dog ran to the cat .\n<|endoftext|>\n" * 50)  # 10 types
    params = yaml.safe_load((run / "params.yaml").read_text())
    params["paths"]["assoc_source"] = "data/user/stories.txt"
    params["assoc_words"]["probes"] = ["the", "zebra", "dog", "moon"]
    (run / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    before = snapshot(run)
    proc = run_command(run, "python", "-m", "stages.assoc.corpus", timeout=120)
    assert_outcome(
        proc,
        "error",
        "assoc_words.probes: 'zebra', 'moon' not in the 10-type vocabulary built from data/user/stories.txt",
    )
    assert_only_changed(run, before)  # the corpus of the tiny run is still there, as it was


@pytest.mark.parametrize(
    "stage, changes, says",
    [
        (  # params allow 100 types, the corpus built holds 64: only the stage reading it can tell
            "words",
            dict(assoc_corpus__vocab_size=100, assoc_words__top_k=65),
            "assoc_words.top_k: 65 is more than the 64 types of data/assoc/corpus",
        ),
        (  # max_sequences 0 keeps every sequence: the number is known once the corpus is built
            "order",
            dict(assoc_corpus__max_sequences=0, assoc_order__n_sequences=65),
            "assoc_order.n_sequences: 65 is more than the 64 sequences of",
        ),
    ],
)
def test_assoc_stages_refuse_sizes_beyond_the_built_corpus(run, stage, changes, says):
    set_params(run, **changes)
    before = snapshot(run)
    assert_outcome(run_command(run, "python", "-m", f"stages.assoc.{stage}", timeout=120), "error", says)
    assert_only_changed(run, before)


def test_a_profile_with_bad_values_leaves_params_yaml_as_it_was(run):
    (run / "mine.yaml").write_text("dino_features:\n  image_size: 5000\nassoc_words:\n  top_k: 900\n")
    before = snapshot(run)
    proc = run_command(run, "python", "-m", "emergence", "profile", "mine.yaml", timeout=120)
    assert_outcome(proc, "error", "assoc_words.top_k: 900 is more than the vocabulary it ranks")
    assert_outcome(proc, "error", "dino_features.image_size: 5000 needs about")
    assert_only_changed(run, before)


def test_chained_profiles_change_params_yaml_only(run):
    before = snapshot(run)
    for name in ("paper", "paper_bpe"):
        assert_outcome(run_command(run, "python", "-m", "emergence", "profile", name, timeout=120), "ok")
    assert_outcome(run_command(run, "python", "-m", "emergence", "check", timeout=120), "ok")
    assert_only_changed(run, before, allowed=("params.yaml",))
