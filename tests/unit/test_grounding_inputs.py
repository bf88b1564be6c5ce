"""What the grounding stages read, checked value for value on a tiny workspace written here: two
corpora whose vocabularies, held-out sets and run folders differ, so reading the wrong file, run,
checkpoint, window length or batch size shows. Runs and checkpoints, vocabulary, turns and windows,
saliency sections and per-run tables, and the visual corpus's dialogs and features."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import assert_names, assert_refused, refuses, refuses_key
from safetensors.torch import save_file

from emergence.core.io import write_parquet
from emergence.core.models.registry import build_model
from emergence.core.train.checkpoint import save_checkpoint
from emergence.studies.grounding import inputs, inputs_params, visual_inputs
from emergence.studies.grounding.inputs_params import SaliencyParams
from emergence.studies.grounding.settings import Corpus, Setting

# ---- the tiny workspace: two corpora, their vocabularies and runs

G_VOCAB = ["<unk>", "ball<ENV>", "ball<LAN>", "cup<ENV>", "cup<LAN>", "<MOT>", "the", "dog"]
V_VOCAB = ["<unk>", "cat<ENV>", "cat<LAN>", "<Q>", "<A>", "a", "is"]
TURNS = [  # (file, tokens as extracted)
    ("a", ["<MOT>", "ball<ENV>", "dog<ENV>", "the<LAN>", "ball<LAN>"]),
    ("a", ["<MOT>", "cup<ENV>", "cup<LAN>"]),  # held out
    ("b", ["<MOT>", "the<LAN>", "dog<LAN>"]),
    ("a", ["<MOT>", "the<LAN>"]),
]
DIALOGS = [  # (image_id, env, tokens as extracted)
    (7, ["a<ENV>", "cat<ENV>"], ["a<ENV>", "cat<ENV>", "<Q>", "is<LAN>", "a<LAN>", "cat<LAN>"]),
    (8, ["cat<ENV>"], ["cat<ENV>", "<Q>", "cat<LAN>"]),  # its image has no features
    (9, ["a<ENV>"], ["a<ENV>", "<Q>", "a<LAN>"]),
]
# steps written out of order and past 9, so a lexicographic or unsorted listing shows
RUNS = {"grounding": {"t2_seed0": [10, 0, 2], "t2_seed3": [5]}, "visual": {"caption_t2_seed0": [40, 4]}}


def tiny_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model("transformer", dict(n_layers=1, d_model=8, n_heads=2, d_head=4, d_mlp=16, n_ctx=8, d_vocab=11))


@pytest.fixture
def ws(tmp_path):
    """(params, {(study, run, step): saved state dict}) of a tiny workspace."""
    paths = {
        key: str(tmp_path / name)
        for key, name in [
            ("grounding_runs", "runs"),
            ("visual_runs", "vruns"),
            ("grounding_vocab", "gvocab.json"),
            ("visual_vocab", "vvocab.json"),
            ("grounding_eval", "geval.parquet"),
            ("visual_eval", "veval.parquet"),
            ("childes_turns", "turns.parquet"),
            ("visual_dialogs", "dialogs.parquet"),
            ("visual_features", "features"),
            ("grounding_saliency", "gsal"),
            ("visual_saliency", "vsal"),
        ]
    }
    params = {
        "paths": paths,
        "grounding_runs": {"models": ["t2", "l1"], "seeds": [0, 3]},
        "grounding_models": {"t2": {"arch": "transformer"}, "l1": {"arch": "lstm"}, "t9": {"arch": "transformer"}},
        "grounding_saliency": {"models": ["t2"], "batch_size": 7},
        "visual_saliency": {"models": ["t2"], "batch_size": 5},
        "grounding_train": {"seq_len": 2},
        "visual_train": {"seq_len": 3},
    }
    for vocab, targets, key in ((G_VOCAB, ["ball", "cup"], "grounding_vocab"), (V_VOCAB, ["cat"], "visual_vocab")):
        (tmp_path / paths[key]).write_text(json.dumps({"targets": targets, "vocab": vocab, "env_marking": "targets"}))
    write_parquet(pd.DataFrame(TURNS, columns=["file", "tokens"]), paths["childes_turns"])
    write_parquet(
        pd.DataFrame({"turn": [1], "word": ["cup"], "context": [["<MOT>", "cup<ENV>"]], "others": [["ball"]]}),
        paths["grounding_eval"],
    )
    dialogs = pd.DataFrame([("v.json", *d) for d in DIALOGS], columns=["file", "image_id", "env", "tokens"])
    write_parquet(dialogs, paths["visual_dialogs"])
    visual_eval = {
        "turn": [0],
        "word": ["cat"],
        "context": [["a", "cat<ENV>", "<Q>", "is", "a"]],
        "others": [["dog"]],
        "image_id": [7],
        "image_context": [["<Q>", "is", "a"]],
        "other_images": [[9]],
    }
    write_parquet(pd.DataFrame(visual_eval), paths["visual_eval"])
    feats = tmp_path / "features"
    feats.mkdir()
    save_file({"features": torch.arange(24.0).reshape(2, 3, 4)}, str(feats / "features.safetensors"))
    (feats / "encoder.json").write_text(json.dumps({"encoder_id": "fake"}))
    write_parquet(pd.DataFrame({"row": [0, 1], "image_id": [9, 7]}), feats / "images.parquet")
    saved = {}
    for study, runs in RUNS.items():
        for r, (run, steps) in enumerate(runs.items()):
            for step in steps:
                model = tiny_model(1000 * r + step + (500 if study == "visual" else 0))
                save_checkpoint(model, tmp_path / paths[f"{study}_runs"] / run, step, {})
                saved[study, run, step] = model.state_dict()
    (tmp_path / "runs" / "empty_seed0").mkdir()
    return params, saved


def same_weights(model: torch.nn.Module, state: dict) -> bool:
    return all(torch.equal(model.state_dict()[k], v) for k, v in state.items())


# ---- runs and checkpoints


def test_runs_of_names_every_model_with_every_seed(ws):
    params, _ = ws
    runs = inputs.runs_of(params)
    assert (runs.models, runs.seeds) == (["t2", "l1"], [0, 3])
    assert runs.names() == ["t2_seed0", "t2_seed3", "l1_seed0", "l1_seed3"]
    with refuses("grounding_runs.sedes: ", "seeds?") as e:  # the key it may mean
        inputs.runs_of({**params, "grounding_runs": {**params["grounding_runs"], "sedes": [1]}})
    assert_refused([str(e.value)], "grounding_runs.sedes", rule="unknown")


@pytest.mark.parametrize(
    "study, run, steps",
    [("grounding", "t2_seed0", [0, 2, 10]), ("grounding", "t2_seed3", [5]), ("visual", "caption_t2_seed0", [4, 40])],
)
def test_run_checkpoints_are_the_runs_own_sorted_by_step(ws, study, run, steps):
    params, _ = ws
    ckpts = inputs.run_checkpoints(params, run, study)
    assert [s for s, _ in ckpts] == steps
    root = params["paths"][f"{study}_runs"]
    assert [str(p) for _, p in ckpts] == [f"{root}/{run}/step{s}" for s in steps]


def test_run_without_checkpoints_says_which_stage_to_run(ws):
    params, _ = ws
    with refuses(f"{params['paths']['grounding_runs']}/empty_seed0: ", "checkpoints", "grounding_train"):
        inputs.run_checkpoints(params, "empty_seed0")
    (Path(params["paths"]["visual_runs"]) / "e").mkdir()
    with refuses(f"{params['paths']['visual_runs']}/e: ", "checkpoints", "visual_train"):
        inputs.run_checkpoints(params, "e", "visual")


def test_checkpoint_models_load_each_step_of_the_run(ws, capsys):
    params, saved = ws
    loaded = list(inputs.checkpoint_models(params, "t2_seed0", "saliency"))
    assert [s for s, _ in loaded] == [0, 2, 10]
    assert all(same_weights(m, saved["grounding", "t2_seed0", s]) for s, m in loaded)
    assert not same_weights(loaded[0][1], saved["grounding", "t2_seed0", 2])  # the checkpoints differ
    assert all(not m.training for _, m in loaded)
    assert "saliency t2_seed0" in capsys.readouterr().err  # the progress bar names the run


@pytest.mark.parametrize(
    "setting, study, run", [("childes", "grounding", "t2_seed3"), ("image", "visual", "caption_t2_seed0")]
)
def test_a_settings_checkpoints_come_from_its_corpus_runs(ws, setting, study, run, capsys):
    params, saved = ws
    s = Setting(setting)
    assert s.checkpoints(params, run) == inputs.run_checkpoints(params, run, study)
    models = list(s.checkpoint_models(params, run, "gain"))
    assert [st for st, _ in models] == [st for st, _ in s.checkpoints(params, run)]
    assert all(same_weights(m, saved[study, run, st]) for st, m in models)
    assert f"gain {run}" in capsys.readouterr().err  # the progress bar says what it loads them for
    other = "t2_seed0" if study == "visual" else "caption_t2_seed0"  # the other corpus's run
    with refuses(f"{params['paths'][f'{study}_runs']}/{other}: ", "not found"):
        s.checkpoints(params, other)


# ---- vocabulary, turns, held-out set, windows


def test_vocab_index_is_token_to_position(ws):
    params, _ = ws
    targets, index = inputs.vocab_index(params)
    assert targets == ["ball", "cup"] and index == {t: i for i, t in enumerate(G_VOCAB)}
    assert index["cup<LAN>"] == 4 and index["<unk>"] == 0
    assert Corpus("childes").vocab_index(params) == (targets, index)
    v_targets, v_index = Corpus("visdial").vocab_index(params)
    assert v_targets == ["cat"] and v_index == {t: i for i, t in enumerate(V_VOCAB)}


def test_raw_turns_and_marked_turns(ws):
    params, _ = ws
    raw = inputs.raw_turns(params)
    assert raw["file"].tolist() == ["a", "a", "b", "a"]
    assert [list(t) for t in raw["tokens"]] == [t for _, t in TURNS]
    marked = inputs.turns(params)
    assert [list(t) for t in marked["tokens"]] == [
        ["<MOT>", "ball<ENV>", "dog", "the", "ball<LAN>"],  # non-targets lose their channel mark
        ["<MOT>", "cup<ENV>", "cup<LAN>"],
        ["<MOT>", "the", "dog"],
        ["<MOT>", "the"],
    ]
    corpus = Corpus("childes")
    assert corpus.table(params, raw=True).equals(raw) and corpus.table(params).equals(marked)
    turns_path = Path(params["paths"]["childes_turns"])
    write_parquet(raw.drop(columns="tokens"), turns_path)
    with refuses(f"{turns_path}: ", "missing", "'tokens'"):
        inputs.raw_turns(params)
    write_parquet(raw.assign(file=1), turns_path)
    with refuses(f"{turns_path}: ", "'file'", "int64"):
        inputs.raw_turns(params)


def test_marking_all_keeps_every_token(ws, tmp_path):
    params, _ = ws
    (tmp_path / "gvocab.json").write_text(json.dumps({"targets": ["ball"], "vocab": G_VOCAB, "env_marking": "all"}))
    assert [list(t) for t in inputs.turns(params)["tokens"]] == [t for _, t in TURNS]


def test_eval_sets_of_each_corpus(ws):
    params, _ = ws
    g = inputs.eval_set(params)
    assert g["turn"].tolist() == [1] and g["word"].tolist() == ["cup"]
    assert Corpus("childes").eval_set(params).equals(g)
    v = visual_inputs.eval_set(params)
    assert v["image_id"].tolist() == [7] and list(v["image_context"][0]) == ["<Q>", "is", "a"]
    assert Corpus("visdial").eval_set(params).equals(v)


def test_eval_set_schema_is_checked(ws):
    params, _ = ws
    write_parquet(pd.DataFrame({"turn": [1], "word": ["cup"], "context": [["x"]]}), params["paths"]["grounding_eval"])
    with refuses(f"{params['paths']['grounding_eval']}: ", "missing", "'others'"):
        inputs.eval_set(params)
    visual = pd.read_parquet(params["paths"]["visual_eval"]).drop(columns="other_images")
    write_parquet(visual, params["paths"]["visual_eval"])
    with refuses(f"{params['paths']['visual_eval']}: ", "missing", "'other_images'"):
        visual_inputs.eval_set(params)


def test_seq_len_from_params_or_the_corpus_default(ws):
    params, _ = ws
    assert inputs_params.seq_len(params) == 2 and Corpus("childes").seq_len(params) == 2
    assert Corpus("visdial").seq_len(params) == 3
    bare = {"grounding_train": {}, "visual_train": {}}
    assert inputs_params.seq_len(bare) == 64 and Corpus("childes").seq_len(bare) == 64
    assert Corpus("visdial").seq_len(bare) == 96


def test_train_windows_leave_out_the_held_out_turn(ws):
    params, _ = ws
    _, index = inputs.vocab_index(params)
    windows = inputs.train_windows(params, index)
    # file a without turn 1: <MOT> ball<ENV> dog the ball<LAN> <MOT> the -> 5 1 7 6 2 5 6, two windows of
    # seq_len + 1 = 3 (the last token left over); file b: <MOT> the dog -> 5 6 7
    assert windows.tolist() == [[5, 1, 7], [6, 2, 5], [5, 6, 7]]
    assert windows.dtype == np.int32


# ---- saliency sections and per-run tables


def test_saliency_batch_size_of_each_section(ws):
    params, _ = ws
    assert inputs.saliency_batch_size(params) == 7
    assert inputs.saliency_batch_size(params, "visual_saliency") == 5
    assert inputs.saliency_batch_size({"grounding_saliency": {"models": []}}) == 64  # the default
    with refuses_key("grounding_saliency.batch_size", 0):
        inputs.saliency_batch_size({"grounding_saliency": {"models": [], "batch_size": 0}})


def test_attention_models_are_run_models_with_heads(ws):
    params, _ = ws
    assert inputs.attention_models(params) == SaliencyParams(models=["t2"], batch_size=7)
    params["grounding_saliency"]["models"] = ["t9"]
    with refuses("grounding_saliency.models: ", "'t9'", "grounding_runs.models ['t2', 'l1']"):
        inputs.attention_models(params)
    params["grounding_saliency"]["models"] = ["t2", "l1"]
    with refuses("grounding_saliency.models: ", "'l1'", "lstm", "attention"):  # its architecture has no heads
        inputs.attention_models(params)


def test_run_files_and_per_run_tables(ws, tmp_path):
    params, _ = ws
    assert inputs.run_file(params, "grounding_saliency", "t2_seed3") == tmp_path / "gsal" / "t2_seed3.parquet"
    assert Setting("childes").run_file(params, "saliency", "t2_seed3") == tmp_path / "gsal" / "t2_seed3.parquet"
    assert (
        Setting("image").run_file(params, "saliency", "image_t2_seed0") == tmp_path / "vsal" / "image_t2_seed0.parquet"
    )
    for seed, share in ((0, [0.1, 0.2]), (3, [0.7])):
        table = pd.DataFrame({"model": "t2", "seed": seed, "step": [0, 10][: len(share)], "share": share})
        write_parquet(table, tmp_path / "gsal" / f"t2_seed{seed}.parquet")
    table, files = inputs.per_run(params, "grounding_saliency", ["t2_seed3", "t2_seed0"], {"share": "f"})
    assert files == [tmp_path / "gsal" / "t2_seed3.parquet", tmp_path / "gsal" / "t2_seed0.parquet"]
    assert table["seed"].tolist() == [3, 0, 0] and table["share"].tolist() == [0.7, 0.1, 0.2]
    assert table.index.tolist() == [0, 1, 2]
    with refuses(f"{tmp_path / 'gsal' / 't2_seed3.parquet'}: ", "missing", "'gain'"):
        inputs.per_run(params, "grounding_saliency", ["t2_seed3"], {"gain": "f"})
    with refuses(f"{tmp_path / 'gsal' / 't2_seed0.parquet'}: ", "missing", "'setting'"):
        inputs.per_run(params, "grounding_saliency", ["t2_seed0"], {}, Setting("caption").key_columns)


# ---- the visual corpus: dialogs, features


def test_raw_dialogs_drop_those_without_features_with_one_warning(ws, capsys):
    params, _ = ws
    raw = visual_inputs.raw_dialogs(params)
    assert raw["image_id"].tolist() == [7, 9] and raw.index.tolist() == [0, 1]
    assert [list(t) for t in raw["tokens"]] == [DIALOGS[0][2], DIALOGS[2][2]]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: ")
    # the features folder, how many dialogs of how many, the key that skipped their images, and the images
    features = params["paths"]["visual_features"]
    assert_names(err[0], f"warning: {features}: ", "1 of 3", "1 image(s)", "dino_features.skip_bad_images")
    assert err[0].endswith("image_id 8)")
    assert Corpus("visdial").table(params, raw=True).equals(raw)
    assert list(raw.columns) == ["file", "image_id", "env", "tokens"]  # renumbered, no old-index column


def test_raw_dialogs_check_both_files_schemas(ws):
    params, _ = ws
    dialogs_path, images = params["paths"]["visual_dialogs"], f"{params['paths']['visual_features']}/images.parquet"
    write_parquet(pd.read_parquet(images).drop(columns="image_id"), images)
    with refuses(f"{images}: ", "missing", "'image_id'"):
        visual_inputs.raw_dialogs(params)
    write_parquet(pd.read_parquet(dialogs_path).drop(columns="tokens"), dialogs_path)
    with refuses(f"{dialogs_path}: ", "missing", "'tokens'"):
        visual_inputs.raw_dialogs(params)


def test_raw_dialogs_all_encoded_no_warning_and_many_skipped_listed_first_five(ws, capsys):
    params, _ = ws
    root = params["paths"]["visual_features"]
    write_parquet(pd.DataFrame({"row": [0, 1, 1], "image_id": [9, 7, 8]}), f"{root}/images.parquet")
    assert len(visual_inputs.raw_dialogs(params)) == 3 and capsys.readouterr().err == ""
    ids = list(range(20, 27))
    rows = [("v.json", i, ["a<ENV>"], ["a<ENV>"]) for i in ids]
    write_parquet(pd.DataFrame(rows, columns=["file", "image_id", "env", "tokens"]), params["paths"]["visual_dialogs"])
    write_parquet(pd.DataFrame({"row": [0], "image_id": [23]}), f"{root}/images.parquet")
    assert visual_inputs.raw_dialogs(params)["image_id"].tolist() == [23]
    err = capsys.readouterr().err
    assert_names(err, "6 of 7", "6 image(s)", "image_id 20, 21, 22, 24, 25, ...)")  # the first five, then more
    write_parquet(pd.DataFrame({"row": [0, 0], "image_id": [23, 26]}), f"{root}/images.parquet")
    visual_inputs.raw_dialogs(params)
    assert (
        capsys.readouterr()
        .err.rstrip()
        .endswith("(skipped by dino_features.skip_bad_images: image_id 20, 21, 22, 24, 25)")
    )


def test_dialogs_follow_the_visual_vocabularys_rule(ws):
    params, _ = ws
    marked = visual_inputs.dialogs(params)
    assert [list(t) for t in marked["tokens"]] == [["a", "cat<ENV>", "<Q>", "is", "a", "cat<LAN>"], ["a", "<Q>", "a"]]
    assert [list(e) for e in marked["env"]] == [["a<ENV>", "cat<ENV>"], ["a<ENV>"]]  # as extracted
    assert Corpus("visdial").table(params).equals(marked)


def test_environment_is_the_image_settings_features_only(ws):
    params, _ = ws
    feats, image_row = visual_inputs.environment(params, "image")
    assert torch.equal(feats, torch.arange(24.0).reshape(2, 3, 4)) and image_row == {9: 0, 7: 1}
    assert visual_inputs.environment(params, "caption") == (None, None)
    assert Setting("childes").environment(params) == (None, None)
    assert Setting("caption").environment(params) == (None, None)
    s_feats, s_rows = Setting("image").environment(params)
    assert torch.equal(s_feats, feats) and s_rows == image_row


def test_matched_inputs_of_caption_and_image_settings(ws):
    params, _ = ws
    _, index = Corpus("visdial").vocab_index(params)
    contexts, targets, env_pos, prefixes = Setting("caption").matched_inputs(params, index)
    assert contexts == [[5, 1, 3, 6, 5]] and targets == [2] and env_pos == [[1]] and prefixes is None
    contexts, targets, env_pos, prefixes = Setting("image").matched_inputs(params, index)
    assert contexts == [[3, 6, 5]] and targets == [2] and env_pos == [[]]  # the caption is left out
    assert torch.equal(prefixes, torch.arange(24.0).reshape(2, 3, 4)[[1]])  # image 7 is features row 1
    _, g_index = Corpus("childes").vocab_index(params)
    contexts, targets, env_pos, prefixes = Setting("childes").matched_inputs(params, g_index)
    assert contexts == [[5, 3]] and targets == [4] and env_pos == [[1]] and prefixes is None
