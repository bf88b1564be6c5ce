"""What the grounding study's data stages read and write: the generators' settings and output folders, the
transcripts and dialogs extracted (the real CHILDES and VisDial samples among them), each corpus's
vocabulary and held-out set under its own section, the templates, the image features, the co-occurrence
inputs, and what the word-rule ablation and each setting's training run (train's `training_data`) train on.

The upstream stages build both corpora with params edited away from the tiny profile's, and the two
corpora's sections differ from each other (sizes, seeds, word rule), so reading the other corpus's
section, a default or the wrong file shows."""

from __future__ import annotations

import copy
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import ROOT, SHARED_DATA
from feeds import build_upstream, one_error, ran, spy, step_of, workspace
from refusals import assert_names, refuses

from emergence.core.io import file_sha256, write_parquet
from emergence.core.models.registry import build_model
from emergence.core.train.batches import epoch_batches, epoch_rows
from emergence.core.train.checkpoint import save_checkpoint
from emergence.studies.grounding import inputs, visual_inputs
from emergence.studies.grounding import templates as templates_lib
from emergence.studies.grounding.childes import ExtractParams, extract_turns, turn_counts
from emergence.studies.grounding.childes_synth import SynthConfig, write_sessions
from emergence.studies.grounding.cooc import cooccurrence_stats
from emergence.studies.grounding.gain import word_gains
from emergence.studies.grounding.marking import all_marked_inputs
from emergence.studies.grounding.nouns import read_nouns
from emergence.studies.grounding.scenes import SceneParams, object_nouns, write_scenes
from emergence.studies.grounding.settings import Corpus, Setting
from emergence.studies.grounding.templates import read_templates
from emergence.studies.grounding.tokens import EvalParams, VocabParams, evaluation_set, read_vocab, training_windows
from emergence.studies.grounding.visdial import extract_dialogs, visdial_counts
from emergence.studies.grounding.visual_data import other_images
from stages.grounding import (
    childes_extract,
    childes_synth,
    cooc,
    dino_features,
    eval_set,
    marking,
    templates,
    visdial_extract,
    visual_scenes,
    vocab,
)
from stages.grounding import train as grounding_train

EVE = SHARED_DATA / "childes" / "Brown-Eve-010600a.cha"
VISDIAL = SHARED_DATA / "visdial"
NOUNS = "resources/grounding/nouns.tsv"
EDITS = {
    "childes_synth": {"turns_per_file": 130, "n_nouns": 7, "seed": 4},
    "grounding_vocab": {"n_words": 5, "min_count": 4},
    "grounding_eval": {"max_per_word": 2, "n_mismatched": 3, "seed": 6},
    "visual_scenes": {"n_images": 21, "seed": 2},
    "visual_vocab": {"n_words": 3, "min_count": 4},
    "visual_eval": {"max_per_word": 3, "n_mismatched": 1, "seed": 5},
}
UPSTREAM = [
    ("childes_synth", []),
    ("childes_extract", []),
    ("vocab", ["--corpus", "childes"]),
    ("eval_set", ["--corpus", "childes"]),
    ("visual_scenes", []),
    ("visdial_extract", []),
    ("dino_features", []),
    ("vocab", ["--corpus", "visdial"]),
    ("eval_set", ["--corpus", "visdial"]),
]
STAGES = {"vocab": vocab, "eval_set": eval_set}
# the tiny profile's DINOv2 is seeded random weights (no download), which it warns about
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.filterwarnings("ignore:.*random-init DINOv2")]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("grounding_inputs")
    build_upstream(root, EDITS, UPSTREAM, "grounding")
    return root


@pytest.fixture
def project(built, tmp_path, monkeypatch):
    """A working directory holding the built data; returns the params writer."""
    for top in ("data", "resources"):
        shutil.copytree(built / top, tmp_path / top)
    return lambda **edits: workspace(tmp_path, monkeypatch, {**EDITS, **edits})


def as_written(df: pd.DataFrame, tmp: Path) -> pd.DataFrame:
    """`df` as a Parquet round trip leaves it (lists come back as arrays), to compare with a stage's file."""
    write_parquet(df, tmp / "want.parquet")
    return pd.read_parquet(tmp / "want.parquet")


def same_files(got: Path, want: Path) -> None:
    names = sorted(p.relative_to(want) for p in want.rglob("*") if p.is_file())
    assert names and names == sorted(p.relative_to(got) for p in got.rglob("*") if p.is_file())
    assert all((got / n).read_bytes() == (want / n).read_bytes() for n in names)


# --- generators ---


def test_childes_synth_writes_the_configured_sessions_of_the_noun_list(tmp_path, monkeypatch, capsys):
    shutil.copytree(ROOT / "resources", tmp_path / "resources")
    cfg = {"n_files": 2, "turns_per_file": 40, "n_nouns": 5, "p_act": 0.5, "seed": 9}
    workspace(tmp_path, monkeypatch, {"childes_synth": cfg, "paths": {"childes_synth": "data/mine"}})
    ran(childes_synth.main, [], capsys)
    write_sessions(SynthConfig(**cfg), read_nouns(NOUNS), tmp_path / "want")
    same_files(Path("data/mine"), tmp_path / "want")
    assert not Path("data/grounding/chat").exists()


def test_visual_scenes_writes_the_configured_scenes_of_the_noun_list(tmp_path, monkeypatch, capsys):
    shutil.copytree(ROOT / "resources", tmp_path / "resources")
    cfg = {"n_images": 5, "n_nouns": 4, "image_size": 40, "rounds": 2, "n_options": 4, "seed": 3}
    workspace(tmp_path, monkeypatch, {"visual_scenes": cfg, "paths": {"visual_scenes": "data/mine"}})
    ran(visual_scenes.main, [], capsys)
    write_scenes(tmp_path / "want", SceneParams(**cfg), read_nouns(NOUNS))
    same_files(Path("data/mine"), tmp_path / "want")
    assert len(json.loads(Path("data/mine/visdial_synthetic.json").read_text())["data"]["dialogs"]) == 5


# --- extraction ---


def transcripts(folder: Path) -> Path:
    """The real Eve transcript, and a copy of it with the child's utterances (and their tiers) removed."""
    folder.mkdir(parents=True)
    shutil.copy(EVE, folder / "eve.cha")
    kept, child = [], False
    for line in EVE.read_text().splitlines(keepends=True):
        if line.startswith(("*", "@")):
            child = line.startswith("*CHI:")
        if not child:
            kept.append(line)
    (folder / "quiet").mkdir()
    (folder / "quiet" / "mother.cha").write_text("".join(kept))
    return folder


def test_childes_extract_reads_the_source_with_compounds_split(project, tmp_path, monkeypatch, capsys, shared_data):
    source = transcripts(tmp_path / "data/transcripts")
    edit = {"split_compounds": True, "max_members": 7, "max_member_mb": 3, "max_ratio": 40}  # limits it keeps
    project(childes_extract=edit, paths={"childes_source": "data/transcripts"})
    read = spy(monkeypatch, childes_extract, "extract_turns", extract_turns)
    counted = spy(monkeypatch, childes_extract, "turn_counts", turn_counts)
    ran(childes_extract.main, [], capsys)
    limits = ExtractParams(**edit)
    assert read.one[1]["limits"] == limits and counted.one[1]["limits"] == limits
    want = extract_turns(source, split_compounds=True, limits=limits)
    assert not want.equals(extract_turns(source))  # Eve says graham_cracker
    pd.testing.assert_frame_equal(pd.read_parquet("data/grounding/turns.parquet"), as_written(want, tmp_path))
    counts = json.loads(Path("reports/metrics/childes_counts.json").read_text())
    speakers = sorted(set(want["speaker"]))
    assert counts == {
        **turn_counts(source, limits=limits),
        "files": 2,
        "env_tokens": int(want["env"].map(len).sum()),
        "lan_tokens": int(want["lan"].map(len).sum()),
        "speakers": speakers,
        "source": "data/transcripts",
        "child_utterances": int((want["speaker"] == "CHI").sum()),
        "files_without_child": 1,
    }
    assert "CHI" in speakers and 0 < counts["child_utterances"] < counts["utterances"]
    warning = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "mother.cha" in warning[0] and "eve.cha" not in warning[0]


def test_childes_extract_holds_a_zip_to_the_configured_limits(project, tmp_path, capsys, shared_data):
    with zipfile.ZipFile(tmp_path / "eve.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.write(EVE, "Brown/Eve/eve.cha")
    project(childes_extract={"max_ratio": 2}, paths={"childes_source": str(tmp_path / "eve.zip")})
    assert childes_extract.main([]) == 1
    assert_names(one_error(capsys), "childes_extract.max_ratio", "(2)", "eve.zip")
    assert not Path("reports/metrics/childes_counts.json").exists()


def test_visdial_extract_reads_the_json_file_of_the_source_folder(project, tmp_path, capsys, shared_data):
    shutil.copytree(VISDIAL, tmp_path / "data/real")
    project(paths={"visdial_source": "data/real"})
    ran(visdial_extract.main, [], capsys)
    file = Path("data/real/visdial_1.0_val_crowdsourced.json")
    want = extract_dialogs(file)
    assert len(want) == 97
    pd.testing.assert_frame_equal(pd.read_parquet("data/visual/dialogs.parquet"), as_written(want, tmp_path))
    counts = json.loads(Path("reports/metrics/visdial_counts.json").read_text())
    assert counts == {**visdial_counts(file, want), "source": str(file)}


# --- each corpus's vocabulary and held-out set ---


@pytest.mark.parametrize("corpus", ["childes", "visdial"])
def test_vocab_picks_targets_from_the_corpus_as_extracted_under_its_own_section(corpus, project, tmp_path, capsys):
    where = Corpus(corpus).key("vocab")
    edit = {"n_words": 2, "min_count": 3, "min_token_count": 3, "env_marking": "all"}
    params = project(**{where: edit})
    ran(vocab.main, ["--corpus", corpus], capsys)
    nouns = list(read_nouns(NOUNS))
    candidates = nouns if corpus == "childes" else object_nouns(nouns)
    assert ("picture" in candidates) == (corpus == "childes")  # a word of the captions' frames, no object
    table = inputs.raw_turns(params) if corpus == "childes" else visual_inputs.raw_dialogs(params)
    targets, words, stats = vocab.target_vocabulary(table, candidates, VocabParams(**edit), where)
    assert len(targets) == 2 and stats["word"].tolist() == candidates
    study = where.split("_")[0]
    got = json.loads(Path(f"data/{study}/vocab.json").read_text())
    assert got == {"targets": targets, "vocab": words, "env_marking": "all"}
    pd.testing.assert_frame_equal(pd.read_parquet(f"data/{study}/targets.parquet"), as_written(stats, tmp_path))


@pytest.mark.parametrize("corpus", ["childes", "visdial"])
def test_eval_set_holds_out_contexts_of_the_corpus_under_its_own_section(corpus, project, tmp_path, capsys):
    c = Corpus(corpus)
    params = project()
    ran(eval_set.main, ["--corpus", corpus], capsys)
    where, table = c.key("eval"), c.table(params)
    targets, _ = c.vocab_index(params)
    p = EvalParams(**EDITS[where])
    source = "data/grounding/turns.parquet" if corpus == "childes" else "data/visual/dialogs.parquet"
    want = evaluation_set(table, targets, p, where, source, max_len=(c.seq_len(params), c.key("train") + ".seq_len"))
    got = pd.read_parquet(f"data/{where.split('_')[0]}/eval.parquet")
    assert want["others"].map(len).eq(p.n_mismatched).all() and want["word"].value_counts().max() == p.max_per_word
    pd.testing.assert_frame_equal(got[list(want.columns)], as_written(want, tmp_path))
    if corpus == "visdial":  # the dialog's own image, its context without the caption, other dialogs' images
        assert len(set(table["image_id"])) == len(table) and set(table["image_id"]) != set(range(len(table)))
        turns = want["turn"].to_numpy()
        assert got["image_id"].tolist() == table["image_id"].to_numpy()[turns].tolist()
        n_env = table["env"].map(len).to_numpy()[turns]
        assert all(n > 0 for n in n_env)
        assert [list(c) for c in got["image_context"]] == [list(c[n:]) for c, n in zip(want["context"], n_env)]
        drawn = other_images(table, want, p.n_mismatched, p.seed)
        assert drawn != other_images(table, want, p.n_mismatched, p.seed + 1)  # the seed decides the draw
        assert [list(o) for o in got["other_images"]] == drawn
    else:
        assert "image_id" not in got.columns


@pytest.mark.parametrize("corpus", ["childes", "visdial"])
def test_eval_set_refuses_contexts_longer_than_its_corpus_training_window(corpus, project, capsys):
    train = Corpus(corpus).key("train")
    project(**{train: {"seq_len": 3}})
    assert eval_set.main(["--corpus", corpus]) == 1
    assert_names(one_error(capsys), f"{train}.seq_len", 3)


# --- templates ---


def test_templates_fill_the_template_file_with_the_targets_held_out_of_training(project, tmp_path, capsys):
    lines = (ROOT / "resources/grounding/templates.tsv").read_text().splitlines(keepends=True)
    header = [line for line in lines if line.startswith(("#", "id\t"))]
    chosen = [next(line for line in lines if line.startswith(f"{t}\t")) for t in ("t08", "t01", "t02")]
    params = project(paths={"grounding_template_source": "templates.tsv"})
    Path("templates.tsv").write_text("".join(header + chosen))
    contexts = spy(monkeypatch := pytest.MonkeyPatch(), templates, "template_contexts", templates_lib.template_contexts)
    try:
        ran(templates.main, [], capsys)
    finally:
        monkeypatch.undo()
    (got_templates, targets, marking, training), _ = contexts.one
    assert [t.id for t in got_templates] == ["t08", "t01", "t02"] and got_templates == read_templates("templates.tsv")
    assert (targets, marking) == read_vocab("data/grounding/vocab.json")[::2]
    turns, held = inputs.turns(params), set(inputs.eval_set(params)["turn"])
    assert held and training == [tokens for i, tokens in zip(turns.index, turns["tokens"]) if i not in held]
    got = pd.read_parquet("data/grounding/templates.parquet")
    want = contexts.returned[0]
    assert got["template"].tolist() == want["template"].tolist() and len(got) == 3 * len(targets)
    by_id = {t.id: t for t in got_templates}
    assert got["speaker"].tolist() == [by_id[t].speaker for t in got["template"]] and "CHI" in set(got["speaker"])
    assert got["source"].tolist() == [by_id[t].source for t in got["template"]]
    known = set(read_vocab("data/grounding/vocab.json")[1])
    assert got["n_unk"].tolist() == [sum(tok not in known for tok in c) for c in want["context"]]
    assert 0 < got["n_unk"].sum() < sum(len(c) for c in want["context"])


# --- image features ---


def fake_features(paths, p, encoder, cache, where):
    """Every image but the third kept; row k of the features holds k."""
    kept = [k for k in range(len(paths)) if k != 2]
    info = {"kept": kept, "skipped": [str(paths[2])], "encoder_id": "enc/x", "pretrained": False}
    feats = torch.arange(len(kept), dtype=torch.float64)[:, None, None].expand(len(kept), 4, 3)
    return feats, info | {"n_encoded": len(kept), "n_cached": 0}


DINO = {"image_size": 42, "pool_grid": 1, "seed": 3, "batch_size": 5}


@pytest.mark.parametrize("skip", [False, True])
def test_dino_features_encode_every_dialogs_image_file_in_id_order(skip, project, monkeypatch, capsys):
    params = project(dino_features={**DINO, "skip_bad_images": skip}, paths={"dino_cache": "data/mine"})
    Path("data/visual/scenes/images/000000000005.png").unlink()  # image_id 5 has no file
    loaded = spy(monkeypatch, dino_features, "load_encoder", lambda p, device, where: "the encoder")
    encoded = spy(monkeypatch, dino_features, "encode_images", fake_features)
    if not skip:
        assert dino_features.main([]) == 1
        assert_names(one_error(capsys), "data/visual/scenes", "image_id 5", "dino_features.skip_bad_images")
        assert not loaded.calls and not encoded.calls
        assert json.loads(Path("data/visual/features/encoder.json").read_text())["image_size"] == 56  # the built one
        return
    ran(dino_features.main, [], capsys)
    (p, device), kw = loaded.one
    assert (p.image_size, p.pool_grid, p.seed, p.batch_size, p.skip_bad_images) == (42, 1, 3, 5, True)
    assert device == "cpu" and kw == {"where": "dino_features"}
    (files, p2, encoder, cache), kw = encoded.one
    assert (
        p2 == p and encoder == "the encoder" and Path(cache) == Path("data/mine") and kw == {"where": "dino_features"}
    )
    ids = sorted(set(pd.read_parquet("data/visual/dialogs.parquet")["image_id"]) - {5})
    assert [int(f.stem) for f in files] == ids and all(Path(f).exists() for f in files)
    kept = [i for k, i in enumerate(ids) if k != 2]
    images = pd.read_parquet("data/visual/features/images.parquet")
    assert images["row"].tolist() == list(range(len(kept))) and images["image_id"].tolist() == kept
    assert images["file"].tolist() == [f"{i:012d}.png" for i in kept]
    assert images["sha256"].tolist() == [file_sha256(f"data/visual/scenes/images/{i:012d}.png") for i in kept]
    record = json.loads(Path("data/visual/features/encoder.json").read_text())
    assert record == {
        "encoder_id": "enc/x",
        "pretrained": False,
        "note": dino_features.NOT_PRETRAINED,
        "image_size": 42,
        "pool_grid": 1,
        "n_images": len(kept),
        "skipped": [f"{ids[2]:012d}.png", "image_id 5: no file"],
    }
    feats, image_row, got_record = visual_inputs.features(params)
    assert got_record == record
    assert feats.dtype == torch.float32 and feats[:, 0, 0].tolist() == list(range(len(kept)))
    assert image_row == {i: k for k, i in enumerate(kept)}


# --- analyses of the built corpus ---

RUNS = {"models": ["transformer4", "lstm4"], "seeds": [0, 2]}


def gain_rows(model: str, seed: int, words: list[str]) -> pd.DataFrame:
    """Two checkpoints x two contexts of each word, values of this run's own."""
    rng = np.random.default_rng(len(model) * 10 + seed)
    n = 4 * len(words)
    return pd.DataFrame(
        {
            "model": model,
            "seed": seed,
            "step": [0, 0, 5, 5] * len(words),
            "word": [w for w in words for _ in range(4)],
            "s_matched": rng.random(n),
            "s_mismatched": rng.random(n),
            "gain": rng.random(n),
        }
    )


def test_cooc_regresses_every_runs_gain_on_the_training_turns_statistics(project, monkeypatch, capsys):
    params = project(grounding_runs=RUNS, grounding_cooc={"features": ["pmi", "log_env", "p_lan_given_env"]})
    targets, _ = inputs.vocab_index(params)
    for model in ("transformer4", "lstm4", "mamba4"):  # mamba4 is no run of grounding_runs
        for seed in (0, 1, 2):
            write_parquet(gain_rows(model, seed, targets), f"data/grounding/gain/{model}_seed{seed}.parquet")
    answer = pd.DataFrame({"model": ["m"], "seed": [0], "step": [0], "r2": [0.5]})
    r2 = spy(monkeypatch, cooc, "r2_table", lambda *a: answer)
    ran(cooc.main, [], capsys)
    (gains, stats, features), _ = r2.one
    assert features == ["pmi", "log_env", "p_lan_given_env"]
    runs = [(m, s) for m in RUNS["models"] for s in RUNS["seeds"]]
    want = word_gains(pd.concat([gain_rows(m, s, targets) for m, s in runs], ignore_index=True))
    key = ["model", "seed", "step", "word"]
    pd.testing.assert_frame_equal(
        gains.sort_values(key).reset_index(drop=True), want.sort_values(key).reset_index(drop=True)
    )
    held = set(inputs.eval_set(params)["turn"])
    want_stats = cooccurrence_stats(inputs.turns(params), held, targets)
    assert not want_stats.equals(cooccurrence_stats(inputs.turns(params), set(), targets))  # held out matters
    pd.testing.assert_frame_equal(stats, want_stats)
    pd.testing.assert_frame_equal(pd.read_parquet("data/grounding/cooc_words.parquet"), stats)
    pd.testing.assert_frame_equal(pd.read_parquet("data/grounding/cooc.parquet"), answer)


def test_cooc_refuses_a_gain_table_without_the_scores_it_averages(project, monkeypatch, capsys):
    params = project(grounding_runs=RUNS)
    targets, _ = inputs.vocab_index(params)
    for model in RUNS["models"]:
        for seed in RUNS["seeds"]:
            write_parquet(gain_rows(model, seed, targets), f"data/grounding/gain/{model}_seed{seed}.parquet")
    broken = "data/grounding/gain/lstm4_seed2.parquet"
    write_parquet(pd.read_parquet(broken).drop(columns="s_matched"), broken)
    r2 = spy(monkeypatch, cooc, "r2_table", lambda *a: None)
    assert cooc.main([]) == 1
    assert_names(one_error(capsys), broken, "s_matched")
    assert not r2.calls and not Path("data/grounding/cooc.parquet").exists()


MARKING = {
    "grounding_marking": {"model": "transformer4", "seed": 2},
    "grounding_runs": {"seeds": [0, 2]},
    "grounding_train": {"lr": 0.007, "batch_size": 5},
}
SAVED = [0, 4, 9]


def trained(model, batch_fn, cfg, out_dir, scratch_dir, **kw):
    """Checkpoints of weights of their own at SAVED steps; the first batches drawn."""
    for step in SAVED:
        torch.manual_seed(step)
        copy_ = copy.deepcopy(model)
        with torch.no_grad():
            for w in copy_.parameters():
                w.add_(torch.randn_like(w))
        save_checkpoint(copy_, out_dir, step, {})
    return [batch_fn(0), batch_fn(1)]


def test_marking_trains_the_named_model_and_seed_on_every_word_marked(project, monkeypatch, capsys):
    params = project(**MARKING)
    train = spy(monkeypatch, marking, "train", trained)
    answer = pd.DataFrame({"measure": ["held_out", "templates"], "word": ["w", "w"], "gain": [0.1, 0.2]})
    gains = spy(monkeypatch, marking, "final_word_gains", lambda *a: answer)
    ran(marking.main, [], capsys)
    targets, _, _ = read_vocab("data/grounding/vocab.json")
    table, words, eval_all = all_marked_inputs(inputs.raw_turns(params), targets, inputs.eval_set(params), 2)
    index = {t: i for i, t in enumerate(words)}
    held = set(eval_all["turn"])
    windows = training_windows(table, held, index, 32, "grounding_train.seq_len")
    (model, batch_fn, cfg), kw = train.one
    assert (cfg.lr, cfg.batch_size, cfg.seed, cfg.steps, cfg.warmup_steps) == (0.007, 5, 2, 12, 2)
    run = Path("data/grounding/marking/transformer4_seed2")
    assert Path(kw["out_dir"]) == run and Path(kw["scratch_dir"]) == Path(
        "data/scratch/grounding/marking_transformer4_seed2"
    )
    fingerprint = "".join(
        file_sha256(f)
        for f in ("data/grounding/turns.parquet", "data/grounding/vocab.json", "data/grounding/eval.parquet")
    )
    assert kw["data_fingerprint"] == f"marking:all:{fingerprint}" and kw["where"] == "grounding_train"
    want_fn = epoch_batches(windows, 5, 2)
    for step, (x, y) in enumerate(train.returned[0]):  # this seed's shuffle of the all-marked windows
        wx, wy = want_fn(step)
        assert torch.equal(x, wx) and torch.equal(y, wy)
    assert len(words) > len(read_vocab("data/grounding/vocab.json")[1])  # every word marked: more tokens
    torch.manual_seed(2)
    config = {k: v for k, v in params["grounding_models"]["transformer4"].items() if k != "arch"}
    initial = build_model("transformer", {**config, "d_vocab": len(index), "n_ctx": 32})
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), initial.state_dict().values()))
    (last, got_eval, got_templates, training, got_targets, got_index), _ = gains.one
    assert step_of(last, {s: run / f"step{s}" for s in SAVED}) == [9]
    pd.testing.assert_frame_equal(got_eval, eval_all)
    assert got_templates == read_templates("resources/grounding/templates.tsv")
    assert training == [t for i, t in zip(table.index, table["tokens"]) if i not in held] and len(training) < len(table)
    assert (got_targets, got_index) == (targets, index)
    written = pd.read_parquet(run.parent / "gain.parquet")
    assert written[["measure", "gain"]].equals(answer[["measure", "gain"]])
    assert written[["model", "seed", "step"]].drop_duplicates().values.tolist() == [["transformer4", 2, 9]]


def test_marking_refuses_a_batch_larger_than_its_training_windows(project, monkeypatch, capsys):
    project(**{**MARKING, "grounding_train": {"batch_size": 900}})
    train = spy(monkeypatch, marking, "train", trained)
    assert marking.main([]) == 1
    assert_names(one_error(capsys), "grounding_train.batch_size", 900)
    assert not train.calls


# --- what each setting's training run reads ---

# each corpus's own window length; the visual one pads the shortest dialogs (27 tokens without the caption)
# and cuts the longest (39); batches of 5 with seed 7: no corpus's count of training sequences divides by 5
SEQ_LENS = {"grounding_train": {"seq_len": 20}, "visual_train": {"seq_len": 32}}
BATCH, DRAW_SEED = 5, 7


def cut_windows(table: pd.DataFrame, held: set[int], index: dict[str, int], seq_len: int) -> np.ndarray:
    """Each file's training rows' tokens one after another (file by file in name order), cut into whole
    windows of seq_len + 1 ids (unknown tokens as 0); the tail shorter than a window is left out."""
    windows = []
    for file in sorted(set(table["file"])):
        rows = [i for i in table.index[table["file"] == file] if i not in held]
        stream = [index.get(t, 0) for i in rows for t in table["tokens"][i]]
        windows += [stream[k : k + seq_len + 1] for k in range(0, len(stream) - seq_len, seq_len + 1)]
    return np.array(windows)


@pytest.mark.parametrize("setting", ["childes", "caption"])
def test_training_data_of_a_text_setting_draws_its_corpus_windows_without_the_held_out_rows(setting, project):
    params = project(**SEQ_LENS)
    corpus = Setting(setting).corpus
    seq_len = SEQ_LENS[corpus.key("train")]["seq_len"]
    table, held = corpus.table(params), set(corpus.eval_set(params)["turn"])
    _, index = corpus.vocab_index(params)
    windows = cut_windows(table, held, index, seq_len)
    assert len(windows) % BATCH and len(windows) < len(cut_windows(table, set(), index, seq_len))
    batch_fn, extra, n, features = grounding_train.training_data(params, Setting(setting), index, BATCH, DRAW_SEED)
    assert (extra, n, features) == ({"n_ctx": seq_len}, len(windows), None)
    rows_of = epoch_rows(len(windows), BATCH, DRAW_SEED)
    for step in range(2 * (len(windows) // BATCH) + 1):  # two epochs and the first batch of a third
        x, y = batch_fn(step)
        batch = torch.from_numpy(windows[rows_of(step)]).long()
        assert torch.equal(x, batch[:, :-1]) and torch.equal(y, batch[:, 1:]), step


def test_train_starts_the_runs_model_from_its_seed_on_that_seeds_batches(project, monkeypatch, capsys):
    params = project(grounding_runs={"seeds": [0, 2]}, grounding_train={"batch_size": 5})
    train = spy(monkeypatch, grounding_train, "train", lambda model, batch_fn, cfg, **kw: [batch_fn(0), batch_fn(1)])
    ran(grounding_train.main, ["--setting", "childes", "--model", "transformer4", "--seed", "2"], capsys)
    (model, _, cfg), kw = train.one
    assert (cfg.seed, cfg.batch_size) == (2, 5)
    assert Path(kw["out_dir"]) == Path("data/grounding/runs/transformer4_seed2")
    corpus = Setting("childes").corpus
    _, index = corpus.vocab_index(params)
    windows = cut_windows(corpus.table(params), set(corpus.eval_set(params)["turn"]), index, 32)
    rows_of = epoch_rows(len(windows), 5, 2)
    for step, (x, y) in enumerate(train.returned[0]):
        batch = torch.from_numpy(windows[rows_of(step)]).long()
        assert torch.equal(x, batch[:, :-1]) and torch.equal(y, batch[:, 1:]), step
    torch.manual_seed(2)
    config = {k: v for k, v in params["grounding_models"]["transformer4"].items() if k != "arch"}
    initial = build_model("transformer", {**config, "d_vocab": len(index), "n_ctx": 32})
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), initial.state_dict().values()))


@pytest.mark.parametrize("setting", ["childes", "caption"])
def test_training_data_refuses_a_window_longer_than_every_file_naming_its_own_sections_seq_len(setting, project):
    where = Setting(setting).key("train")
    params = project(**{where: {"seq_len": 5000}})
    _, index = Setting(setting).corpus.vocab_index(params)
    with refuses(f"{where}.seq_len", 5000):
        grounding_train.training_data(params, Setting(setting), index, BATCH, DRAW_SEED)


def test_training_data_of_the_image_setting_reads_each_training_dialog_after_its_own_image(project):
    params = project(**SEQ_LENS)
    # one more dialog, on the image of dialog 2: an image two training dialogs share, out of id order
    dialogs = pd.read_parquet("data/visual/dialogs.parquet")
    write_parquet(
        pd.concat([dialogs, dialogs.iloc[[20]].assign(image_id=3)], ignore_index=True), "data/visual/dialogs.parquet"
    )
    table, held = visual_inputs.dialogs(params), set(visual_inputs.eval_set(params)["turn"])
    feats, image_row, _ = visual_inputs.features(params)
    _, index = Setting("image").corpus.vocab_index(params)
    training = [i for i in range(len(table)) if i not in held]
    width = SEQ_LENS["visual_train"]["seq_len"] + 1
    ids = np.full((len(training), width), -1, dtype=np.int64)  # the dialog without its caption, padded with -1
    for r, i in enumerate(training):
        spoken = [index.get(t, 0) for t in table["tokens"][i][len(table["env"][i]) :]]
        ids[r, : min(len(spoken), width)] = spoken[:width]
    image_rows = [image_row[table["image_id"][i]] for i in training]
    assert (ids == -1).any() and (ids != -1).all(axis=1).any() and len(training) % BATCH
    assert image_rows != [table["image_id"][i] for i in training] and len(set(image_rows)) < len(image_rows)
    batch_fn, extra, n, features = grounding_train.training_data(params, Setting("image"), index, BATCH, DRAW_SEED)
    assert feats.shape[1] != feats.shape[2]  # prefix positions and feature width tell apart
    assert extra == {"n_ctx": width - 1 + feats.shape[1], "d_prefix": feats.shape[2]}
    assert n == len(training)
    # the distinct training images, each once (their statistics standardise the prefix); no held-out one
    assert torch.equal(features, feats[sorted(set(image_rows))]) and len(features) < len(feats)
    rows_of = epoch_rows(len(training), BATCH, DRAW_SEED)
    for step in range(2 * (len(training) // BATCH) + 1):
        x, y = batch_fn(step)
        rows = rows_of(step)
        assert torch.equal(x["idx"], torch.from_numpy(ids[rows, :-1]).clamp(min=0)), step  # padding read as 0
        assert torch.equal(y, torch.from_numpy(ids[rows, 1:])), step  # padding ignored as -1
        assert torch.equal(x["prefix"], feats[[image_rows[r] for r in rows]]), step


def test_training_data_refuses_training_images_without_features_naming_the_lowest_id(project, monkeypatch):
    params = project(**SEQ_LENS)
    feats, image_row, record = visual_inputs.features(params)
    table, held = visual_inputs.dialogs(params), set(visual_inputs.eval_set(params)["turn"])
    _, index = Setting("image").corpus.vocab_index(params)
    held_image = int(table["image_id"][min(held)])
    training_images = {int(table["image_id"][i]) for i in range(len(table)) if i not in held}
    assert {3, 12} <= training_images and held_image not in training_images

    def lacking(*image_ids):
        rows = {k: v for k, v in image_row.items() if k not in image_ids}
        monkeypatch.setattr(visual_inputs, "features", lambda p: (feats, rows, record))

    lacking(held_image)  # a held-out dialog's image is not trained on
    assert grounding_train.training_data(params, Setting("image"), index, BATCH, DRAW_SEED)[2] == len(table) - len(held)
    lacking(12, 3, held_image)
    with refuses("data/visual/features", "image_id 3"):
        grounding_train.training_data(params, Setting("image"), index, BATCH, DRAW_SEED)
