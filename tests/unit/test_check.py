"""`python -m emergence check`: the whole params file, every problem on its own line, before anything runs."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from params_edits import SHIPPED, edited
from refusals import assert_names, assert_not_refused, assert_refused, refuses, refuses_key

from emergence.check import problems_of
from emergence.core.config import read_params
from emergence.params import load_schemas, resolve_schema

SECTIONS = load_schemas(ROOT)


def with_profile(*names: str) -> dict:
    """params.yaml with profiles applied in turn, by a plain recursive merge (not the profile module)."""

    def merge(base: dict, over: dict) -> dict:
        out = dict(base)
        for key, value in over.items():
            out[key] = merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
        return out

    params = SHIPPED
    for name in names:
        params = merge(params, yaml.safe_load((ROOT / "profiles" / f"{name}.yaml").read_text()))
    return params


@pytest.mark.parametrize(
    "params",
    [SHIPPED, with_profile("tiny"), with_profile("paper"), with_profile("paper", "paper_bpe")],
    ids=["default", "tiny", "paper", "paper_bpe"],
)
def test_shipped_params_and_profiles_pass(params):
    assert problems_of(params) == []


def test_every_section_has_exactly_one_schema():
    assert set(SECTIONS) == set(SHIPPED)


@pytest.mark.parametrize(
    "ref, named",
    [
        ("emergence.core.config.BaseParams", ["'module:Name'", "'emergence.core.config.BaseParams'"]),
        (["a", "b"], ["'module:Name'", "['a', 'b']"]),
        ("emergence.core.nowhere:X", ["load", "emergence.core.nowhere:X", "No module named 'emergence.core.nowhere'"]),
        ("emergence.core.config:Missing", ["load", "emergence.core.config:Missing"]),
        ("emergence.core.declared:DECLARATION", ["emergence.core.declared:DECLARATION", "dataclass"]),
    ],
)
def test_a_bad_schema_reference_names_the_section(ref, named):
    with refuses("pipeline.yaml: schemas.base: ", *named):
        resolve_schema("base", ref)


def test_a_schema_may_be_a_dataclass_or_a_function_of_params_and_section():
    by_class = resolve_schema("base", "emergence.core.config:BaseParams")
    assert by_class({"base": {"seeds": [3], "threads": 1}}).seeds == [3]
    with refuses_key("base.threads", 0):
        by_class({"base": {"seeds": [0], "threads": 0}})
    by_function = resolve_schema("mine", "emergence.params:check_paths")  # the section name is passed on
    with refuses("mine.x") as e:
        by_function({"mine": {"x": 3}})
    assert_refused([str(e.value)], "mine.x", 3, rule="string")


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_a_typo_in_any_section_is_named(name):
    params = copy.deepcopy(SHIPPED)
    params[name]["zz_typo"] = 1
    problems = problems_of(params)
    assert len(problems) == 1 and problems[0].startswith(f"{name}.zz_typo: "), problems


def test_all_problems_of_all_sections_are_listed():
    params = edited(binding_ablation__colour="red", assoc_train__lr="fast", base__threads=0)
    params["assoc_train"]["epochs"] = "many"
    params["extra_section"] = {}
    del params["report"]
    problems = problems_of(params)
    assert len(problems) == 6, problems
    for key, value in [
        ("extra_section", None),
        ("report", None),
        ("binding_ablation.colour", "n_programs"),  # the known keys named beside the unknown one
        ("assoc_train.lr", "'fast'"),
        ("assoc_train.epochs", "'many'"),
        ("base.threads", 0),
    ]:
        assert_refused(problems, key, value)


@pytest.mark.parametrize(
    "changes, key, named",
    [
        (dict(grounding_saliency__models=["transformer4", "lstm4"]), "grounding_saliency.models", ["'lstm4'", "lstm"]),
        (
            dict(grounding_saliency__models=["transformer12"]),
            "grounding_saliency.models",
            ["'transformer12'", "grounding_runs.models", "['transformer4', 'mamba4', 'lstm4']"],
        ),
        (
            dict(visual_saliency__models=["mamba4"]),
            "visual_saliency.models",
            ["'mamba4'", "visual_runs.models", "['transformer4']"],
        ),
        (
            dict(grounding_runs__models=["transformer4", "gpt9"], grounding_llc__models=["transformer4"]),
            "grounding_runs.models",
            ["'gpt9'", "grounding_models", "'transformer18'"],
        ),
        (dict(assoc_words__n_layers=2), "assoc_words", ["n_layers 2", "seed 0", "assoc_runs", "[1, 3]"]),
        (dict(visual_runs__settings=["caption", "audio"]), "visual_runs.settings", ["'audio'", "['caption', 'image']"]),
        (dict(grounding_train__seq_len=1), "grounding_train.seq_len", [">= 2", "got 1"]),
        (dict(grounding_models__odd=3), "grounding_models.odd", ["mapping", "got 3"]),  # there, but not a model
        (dict(binding_patching__checkpoint="latest"), "binding_patching.checkpoint", ["final or step<N>", "'latest'"]),
        (dict(llc__batch_size=5000), "llc.batch_size", ["5000", "n_sequences"]),  # whole batches of them
        (dict(dino_features__pool_grid=100), "dino_features.pool_grid", ["100", "image_size"]),
        (dict(dino_features__image_size=13), "dino_features.image_size", [">= 14", "got 13"]),  # under one patch
        (dict(assoc_corpus__seq_len=1), "assoc_corpus.seq_len", ["seq_len: 1", "at least 2"]),
        (dict(grounding_lens__n_checkpoints=500), "grounding_lens.n_checkpoints", ["500", "grounding_train"]),
        (dict(visual_scenes__n_images=10**9), "visual_scenes.n_images", ["1000000000", "GB free"]),
        (dict(visual_train__seed=3), "visual_train.seed", ["base.seeds"]),
        (dict(grounding_lens__n_checkpoints=0), "grounding_lens.n_checkpoints", [">= 1", "got 0"]),
        (dict(grounding_lens__kl_windows=True), "grounding_lens.kl_windows", ["integer", "got True"]),
        (dict(assoc_corpus__format="html"), "assoc_corpus.format", ["text, chat", "'html'"]),
        (dict(binding_model__d_vocab=40), "binding_model.d_vocab", ["tokenizer"]),
        (dict(binding_train__stream=1), "binding_train.stream", ["true or false", "got 1"]),
        (
            dict(binding_train__stream=False, binding_train__stream_distractor=None, binding_train__stream_links=None),
            "binding_train.stream_hop_weight_power",
            ["stream: true", "null"],
        ),
        (
            dict(binding_programs__distribution="balanced", binding_train__stream_links=None),
            "binding_train.stream_distractor",
            ["binding_programs.distribution", "'balanced'", "null"],
        ),
        (
            dict(grounding_marking__seed=7),
            "grounding_marking",
            ["transformer4 seed 7", "grounding_runs", "['transformer4', 'mamba4', 'lstm4']", "[0, 1]"],
        ),
        (
            dict(binding_programs__distribution="balanced", binding_train__stream_distractor=None),
            "binding_train.stream_links",
            ["binding_programs.distribution", "'balanced'", "null"],
        ),
        (
            dict(
                binding_programs__links="mixed",
                binding_programs__distribution="balanced",
                binding_train__stream_distractor=None,
                binding_train__stream_links=None,
            ),
            "binding_programs.links",
            ["'mixed'", "distribution: paper"],
        ),
    ],
)
def test_one_line_per_problem_naming_the_key(changes, key, named):
    problems = problems_of(edited(**changes))
    assert len(problems) == 1, problems
    assert_names(problems[0], key, *named)
    assert_refused(problems, key)


@pytest.mark.parametrize(
    "changes, key, value",
    [
        (dict(binding_train__stream_hop_weight_power=-1), "binding_train.stream_hop_weight_power", -1),
        (dict(binding_stress__curve_every=-5), "binding_stress.curve_every", -5),
        (dict(binding_train__stream_distractor="twin"), "binding_train.stream_distractor", "twin"),
        (dict(binding_train__eval_programs=0), "binding_train.eval_programs", 0),
        (dict(binding_train__stream_links="spread"), "binding_train.stream_links", "spread"),
    ],
)
def test_one_line_per_refused_value_naming_the_key_and_value(changes, key, value):
    problems = problems_of(edited(**changes))
    assert len(problems) == 1, problems
    assert_refused(problems, key, value)


def test_a_model_entry_is_checked_against_its_architecture():
    params = copy.deepcopy(SHIPPED)
    params["grounding_models"]["lstm4"]["n_heads"] = 4
    params["grounding_models"]["mamba4"]["arch"] = "rnn"
    params["grounding_models"]["transformer4"]["n_ctx"] = 64
    problems = problems_of(params)
    assert len(problems) == 3, problems
    assert_refused(problems, "grounding_models.transformer4.n_ctx", rule="seq_len")
    assert_refused(problems, "grounding_models.mamba4.arch", "'rnn'", rule="['transformer', 'mamba2', 'lstm']")
    assert_refused(problems, "grounding_models.lstm4.n_heads", rule="'lstm'")


def test_duplicate_keys_are_refused_with_both_lines(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("base:\n  seeds: [0]\n  threads: 2\n  threads: 3\n")
    with refuses(f"{path} line 4", "'threads'", "line 3", error=Exception):
        read_params(path)


def test_non_utf8_is_one_line(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_bytes(b"base:\n  seeds: [0]\n  note: \xff\n")
    with refuses(path, "UTF-8", "byte 27", error=Exception):
        read_params(path)


def run_check(path: Path) -> subprocess.CompletedProcess:
    """The CLI on `path`, without timing this machine for the estimate (test_estimate.py)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "emergence", "check", "--root", str(ROOT), str(path), "--estimate", "none"],
        cwd=path.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_exit_codes_and_lines(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text((ROOT / "params.yaml").read_text())
    bad.write_text(yaml.safe_dump(edited(base__device="gpu", assoc_order__steps=2)))
    ok, failed = run_check(good), run_check(bad)
    assert ok.returncode == 0 and ok.stderr == ""
    assert failed.returncode == 1
    *errors, last = failed.stderr.splitlines()
    assert len(errors) == 2 and all(line.startswith("error: ") for line in errors), errors
    assert_refused(errors, "base.device", "'gpu'", rule="auto, cpu, cuda")
    assert_refused(errors, "assoc_order.steps", 2, rule=">= 4")
    assert_names(last, bad, "2 problem(s)")


def test_a_misspelt_section_is_named_with_its_closest_section():
    params = copy.deepcopy(SHIPPED)
    params["binding_trainn"] = {"steps": 3}
    (problem,) = problems_of(params)
    assert_refused([problem], "binding_trainn", "binding_train?", rule=", ".join(SECTIONS))  # closest, then all


@pytest.mark.parametrize(
    "changes, key, value",
    [
        (dict(binding_data__seed=-3), "binding_data.seed", -3),
        (dict(childes_synth__seed=-1), "childes_synth.seed", -1),
        (dict(assoc_runs__seeds=[0, -2]), "assoc_runs.seeds", [0, -2]),
    ],
)
def test_negative_seeds_are_refused_in_any_section(changes, key, value):
    problems = problems_of(edited(**changes))
    assert len(problems) == 1
    assert_refused(problems, key, value, rule=">= 0")


@pytest.mark.parametrize(
    "where, key, closest",
    [
        ("binding_train", "stpes", "steps"),
        ("assoc_corpus", "vocab_sise", "vocab_size"),
        ("dino_features", "pool_gird", "pool_grid"),
    ],
)
def test_a_misspelt_key_in_a_known_section_names_the_closest_key(where, key, closest):
    params = copy.deepcopy(SHIPPED)
    params[where][key] = 1
    problems = problems_of(params)
    assert len(problems) == 1
    assert_refused(problems, f"{where}.{key}", f"{closest}?", rule="known:")  # the closest key, then all


def test_a_misspelt_key_of_a_model_entry_names_the_closest_key():
    params = copy.deepcopy(SHIPPED)
    params["grounding_models"]["lstm4"]["n_layer"] = 3
    problems = problems_of(params)
    assert len(problems) == 1
    assert_refused(problems, "grounding_models.lstm4.n_layer", "n_layers?", rule="'lstm'")  # of that architecture


@pytest.mark.parametrize("key", ["dense_until", "n_log_checkpoints"])
def test_negative_checkpoint_counts_are_refused(key):
    problems = problems_of(edited(**{f"assoc_train__{key}": -1}))
    assert len(problems) == 1
    assert_refused(problems, f"assoc_train.{key}", -1)


@pytest.mark.parametrize(
    "profile, named",
    [
        ("base:\n  threads: 1\n  threads: 2\n", ["line 3", "YAML", "'threads'", "line 2"]),
        ("binding_train:\n  stpes: 3\n", ["mine.yaml: binding_train.stpes: ", "steps?"]),
        ("base: [\n", ["line 2", "YAML"]),
    ],
)
def test_a_bad_profile_is_one_line_and_writes_nothing(tmp_path, profile, named):
    params, overlay = tmp_path / "params.yaml", tmp_path / "mine.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    overlay.write_text(profile)
    result = subprocess.run(
        [sys.executable, "-m", "emergence.core.profile", str(overlay), "--params", str(params)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1 and len(errors) == 1, result.stderr
    assert_names(errors[0], overlay, *named)
    assert params.read_text() == (ROOT / "params.yaml").read_text()


# ---- sizes bounded by what they draw on (emergence.bounds) -------------------------------------------

# the default's splits, worked out by hand: 60000 x 0.002 = 120 val programs, 60000 - 54000 - 120 test
VAL, TEST = 120, 5880
SPLIT_OF = "binding_data.n_programs 60000 x split [0.9, 0.002, 0.098]"


@pytest.mark.parametrize(
    "section, key, split, bound",
    [
        ("binding_train", "eval_programs", "val", VAL),
        ("binding_trajectory", "n_programs", "test", TEST),
        ("binding_ablation", "n_programs", "test", TEST),
        ("binding_patching", "n_pairs", "test", TEST),
    ],
)
def test_an_eval_set_larger_than_its_split_is_refused(section, key, split, bound):
    assert problems_of(edited(**{f"{section}__{key}": bound})) == []
    assert problems_of(edited(**{f"{section}__{key}": bound + 1})) == [
        f"{section}.{key}: {bound + 1} is more than the {bound} programs of the {split} split ({SPLIT_OF}); "
        f"at most {bound}"
    ]


def test_the_splits_follow_binding_data():
    # 1000 programs: 900 train, 2 val, 98 test
    split = "(binding_data.n_programs 1000 x split [0.9, 0.002, 0.098])"
    assert problems_of(edited(binding_data__n_programs=1000, binding_train__eval_programs=3)) == [
        f"binding_train.eval_programs: 3 is more than the 2 programs of the val split {split}; at most 2",
        f"binding_trajectory.n_programs: 1000 is more than the 98 programs of the test split {split}; at most 98",
        f"binding_ablation.n_programs: 500 is more than the 98 programs of the test split {split}; at most 98",
        f"binding_patching.n_pairs: 200 is more than the 98 programs of the test split {split}; at most 98",
    ]


@pytest.mark.parametrize(
    "section, key, bound, against",
    [
        ("assoc_words", "top_k", 128, "assoc_corpus.vocab_size 128"),
        ("assoc_train", "batch_size", 512, "assoc_corpus.max_sequences 512"),
        ("assoc_order", "n_sequences", 512, "assoc_corpus.max_sequences 512"),
        ("assoc_causal", "n_sequences", 512, "assoc_corpus.max_sequences 512"),
    ],
)
def test_assoc_sizes_are_bounded_by_the_corpus(section, key, bound, against):
    assert problems_of(edited(**{f"{section}__{key}": bound})) == []
    problems = problems_of(edited(**{f"{section}__{key}": bound + 1}))
    assert len(problems) == 1
    assert_refused(problems, f"{section}.{key}", value=bound + 1, rule=against)
    assert_refused(problems, f"{section}.{key}", rule=f"at most {bound}")


@pytest.mark.parametrize("n_checkpoints, refused", [(11, False), (12, True)])
def test_the_lens_may_take_every_checkpoint_a_run_saves_and_no_more(n_checkpoints, refused):
    # 1000 steps saved every 100, no dense or log-spaced ones: steps 0, 100, ..., 1000 are 11 checkpoints
    params = edited(grounding_lens__n_checkpoints=n_checkpoints)
    params["grounding_train"].update(steps=1000, checkpoint_every=100, dense_until=0, n_log_checkpoints=0)
    if refused:
        assert_refused(problems_of(params), "grounding_lens.n_checkpoints", value=n_checkpoints, rule="11")
    else:
        assert_not_refused(problems_of(params), "grounding_lens.n_checkpoints")


def test_n_sequences_is_unbounded_when_the_corpus_keeps_every_sequence():
    assert problems_of(edited(assoc_corpus__max_sequences=0, assoc_order__n_sequences=10**6)) == []


@pytest.mark.parametrize("tokenizer", ["word", "bpe"])
def test_probe_words_missing_from_the_embedded_corpus_are_named(tokenizer):
    params = edited(assoc_words__probes=["dog", "zebra", "park", "qq"], assoc_corpus__tokenizer=tokenizer)
    problems = problems_of(params)
    assert len(problems) == 1
    assert problems[0].startswith("assoc_words.probes: 'zebra', 'qq' not in the ")
    assert problems[0].endswith("vocabulary built from the embedded stories (data/assoc/stories.txt, assoc_stories)")


def test_probe_words_of_a_user_corpus_wait_for_the_corpus_stage():
    params = edited(assoc_words__probes=["zebra"])
    params["paths"]["assoc_source"] = "data/user/TinyStories-train.txt"
    assert problems_of(params) == []


def test_dino_image_size_beyond_memory_is_refused():
    (line,) = problems_of(edited(dino_features__image_size=5000))
    assert line.startswith("dino_features.image_size: 5000 needs about ")
    assert "GiB for one batch of 16 (127449 patches of 14 px, width 384), more than this machine's " in line


def test_dino_memory_bound_is_exact_at_its_boundary(monkeypatch):
    from emergence import bounds

    small = bounds.RANDOM_INIT_SHAPES["facebook/dinov2-small"]
    # by hand, image 112 batch 16: 8 x 8 + 1 = 65 tokens; weights 12 (4 + 8) 384^2; pixels 2 x 16 x 3 x 112^2;
    # activations 16 x 65 x 10 x 384; scores 16 x 65^2; 4 bytes each
    need = 4 * (12 * 12 * 384**2 + 2 * 16 * 3 * 112**2 + 16 * 65 * 10 * 384 + 16 * 65**2)
    assert bounds.dino_batch_bytes(112, 16, small) == need
    params = edited(dino_features__image_size=112)
    monkeypatch.setattr(bounds, "machine_memory", lambda: need)
    assert problems_of(params) == []
    monkeypatch.setattr(bounds, "machine_memory", lambda: need - 1)
    assert problems_of(params) == [
        "dino_features.image_size: 112 needs about 0 GiB for one batch of 16 (64 patches of 14 px, width 384), "
        "more than this machine's 0 GiB of RAM; at most 98 fits at this batch_size"
    ]
    largest = bounds.largest_image(16, small, need - 1)
    assert bounds.dino_batch_bytes(largest, 16, small) <= need - 1 < bounds.dino_batch_bytes(largest + 14, 16, small)


def run_profile(params: Path, *names: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "emergence", "profile", *names, "--params", str(params)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )


def test_a_profile_with_bad_values_lists_every_problem_and_writes_nothing(tmp_path):
    params, overlay = tmp_path / "params.yaml", tmp_path / "bad.yaml"
    params.write_bytes((ROOT / "params.yaml").read_bytes())
    overlay.write_text("binding_train:\n  eval_programs: 121\nbase:\n  threads: 0\nassoc_words:\n  top_k: 129\n")
    result = run_profile(params, str(overlay))
    assert result.returncode == 1
    *errors, last = result.stderr.splitlines()
    assert len(errors) == 3 and all(line.startswith("error: ") for line in errors), errors
    assert_refused(errors, "base.threads", 0, rule=">= 1")
    assert_refused(errors, "binding_train.eval_programs", 121, rule=SPLIT_OF)  # the bound, and what it comes from
    assert_refused(errors, "binding_train.eval_programs", rule="at most 120")
    assert_refused(errors, "assoc_words.top_k", 129, rule="assoc_corpus.vocab_size 128")
    assert_refused(errors, "assoc_words.top_k", rule="at most 128")
    assert_names(last, params, overlay, "3 problem(s)")
    assert params.read_bytes() == (ROOT / "params.yaml").read_bytes()


def test_chained_profiles_apply_and_give_the_merge(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_bytes((ROOT / "params.yaml").read_bytes())
    for name in ("paper", "paper_bpe"):
        result = run_profile(params, name)
        assert result.returncode == 0, result.stderr
    assert yaml.safe_load(params.read_text()) == with_profile("paper", "paper_bpe")


def test_scene_images_beyond_what_pil_reads_are_refused():
    side = 9459  # floor(sqrt(89,478,485)), PIL's Image.MAX_IMAGE_PIXELS
    assert_not_refused(problems_of(edited(visual_scenes__image_size=side)), "visual_scenes.image_size")
    problems = problems_of(edited(visual_scenes__image_size=side + 1))  # (and 600 of them fill a disk: n_images)
    assert_refused(problems, "visual_scenes.image_size", f"{(side + 1) ** 2:,} pixels", rule="at most 9459")


def test_a_path_starting_with_home_shorthand_is_refused_with_the_full_path(monkeypatch):
    """DVC reads a dep `~/corpora` as ./~/corpora and no stage expands it: refused before anything runs."""
    monkeypatch.setenv("HOME", "/home/alice")
    params = copy.deepcopy(SHIPPED)
    params["paths"]["childes_source"] = "~/corpora/childes"
    params["dino_features"]["local_dir"] = "~/models/dinov2-small"
    assert problems_of(params) == [
        "paths.childes_source: '~/corpora/childes' starts with ~, which nothing expands (DVC neither): "
        "write the full path, '/home/alice/corpora/childes'",
        "dino_features.local_dir: '~/models/dinov2-small' starts with ~, which nothing expands (DVC neither): "
        "write the full path, '/home/alice/models/dinov2-small'",
    ]
    params["paths"]["childes_source"] = "data/user/~draft/childes"  # a ~ inside a name is a plain character
    assert len(problems_of(params)) == 1
