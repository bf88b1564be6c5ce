"""What each grounding analysis stage feeds its analysis: the run (setting, model, seed), its checkpoints,
the held-out contexts and vocabulary of the setting's corpus, the training windows, the params; and the
lens stage's per-layer rows (`lens_rows`), against each layer's readout computed context by context.

The upstream stages build both corpora at the tiny profile (their vocabularies and held-out sets differ,
so reading the other corpus's shows); every run's checkpoints hold weights of their own, and decoy runs
of another seed and model sit beside the one asked for."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from feeds import build_upstream, ran, save_run, spy, spy_listing, step_of, tiny_params, workspace

from emergence.core.io import write_parquet
from emergence.core.models.registry import build_model
from emergence.interp.tuned_lens import TunedLens
from emergence.studies.grounding import inputs, visual_inputs
from emergence.studies.grounding.gain import evaluation_pairs
from emergence.studies.grounding.tokens import ENV, LAN, encode, read_vocab, training_windows
from emergence.studies.grounding.visual_gain import matched_visual_inputs
from stages.grounding import ablation, gain, heads, lens, llc, saliency, template_gain

SEED = 2  # not the first of any seed list: a stage that falls back to seed 0 reads a decoy
EDITS = {
    "grounding_runs": {"seeds": [0, SEED]},
    "visual_runs": {"seeds": [0, SEED]},
    "grounding_llc": {"seeds": [SEED]},
}
STEPS = [0, 1, 3, 10, 40]
UPSTREAM = [
    ("childes_synth", []),
    ("childes_extract", []),
    ("vocab", ["--corpus", "childes"]),
    ("eval_set", ["--corpus", "childes"]),
    ("templates", []),
    ("visual_scenes", []),
    ("visdial_extract", []),
    ("dino_features", []),
    ("vocab", ["--corpus", "visdial"]),
    ("eval_set", ["--corpus", "visdial"]),
]
RUNS = {  # setting -> (runs folder, the run asked for, decoys)
    "childes": ("data/grounding/runs", f"transformer4_seed{SEED}", ["transformer4_seed0", f"mamba4_seed{SEED}"]),
    "caption": ("data/visual/runs", f"caption_transformer4_seed{SEED}", [f"image_transformer4_seed{SEED}"]),
    "image": ("data/visual/runs", f"image_transformer4_seed{SEED}", [f"caption_transformer4_seed{SEED}"]),
}
ARGV = ["--model", "transformer4", "--seed", str(SEED)]
# the tiny profile's DINOv2 is seeded random weights (no download), which it warns about
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.filterwarnings("ignore:.*random-init DINOv2")]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("grounding")
    build_upstream(root, EDITS, UPSTREAM, "grounding")
    params = tiny_params(EDITS)
    config = {k: v for k, v in params["grounding_models"]["transformer4"].items() if k != "arch"}
    for corpus, folder in (("grounding", "data/grounding/runs"), ("visual", "data/visual/runs")):
        _, vocab, _ = read_vocab(root / f"data/{corpus}/vocab.json")
        names = {n for f, run, decoys in RUNS.values() if f == folder for n in (run, *decoys)}
        for name in names:
            save_run(root / folder / name, STEPS, "transformer", {**config, "d_vocab": len(vocab), "n_ctx": 64})
    return root


@pytest.fixture
def project(built, tmp_path, monkeypatch):
    """A working directory holding the built data; returns the params written there."""
    for top in ("data", "resources"):
        shutil.copytree(built / top, tmp_path / top)
    return lambda **edits: workspace(tmp_path, monkeypatch, {**EDITS, **edits})


def run_steps(setting: str) -> dict:
    folder, run, _ = RUNS[setting]
    return {step: Path(folder, run, f"step{step}") for step in STEPS}


def corpus_of(setting: str, params: dict) -> tuple[pd.DataFrame, list[str], dict[str, int]]:
    """(held-out set, targets, token index) of the setting's corpus, read from its files."""
    study = "grounding" if setting == "childes" else "visual"
    targets, vocab, _ = read_vocab(f"data/{study}/vocab.json")
    held = inputs.eval_set(params) if setting == "childes" else visual_inputs.eval_set(params)
    return held, targets, {t: i for i, t in enumerate(vocab)}


def loaded_in_order(models, setting: str) -> None:
    """`models`: (step, model) pairs; every checkpoint of the run, in step order, each its own weights."""
    assert [s for s, _ in models] == STEPS
    assert all(step_of(model, run_steps(setting)) == [s] for s, model in models)


def word_table(*args, **kwargs) -> pd.DataFrame:
    return pd.DataFrame({"word": ["w"], "gain": [0.25]})


@pytest.mark.parametrize("setting", ["childes", "caption", "image"])
def test_gain_reads_every_checkpoint_of_the_run_on_its_corpus_held_out_set(setting, project, monkeypatch, capsys):
    params = project()
    text, image = spy(monkeypatch, gain, "gain_rows", word_table), spy(monkeypatch, gain, "image_gain_rows", word_table)
    ran(gain.main, ["--setting", setting, *ARGV], capsys)
    held, _, index = corpus_of(setting, params)
    used, unused = (image, text) if setting == "image" else (text, image)
    assert not unused.calls and len(used.calls) == len(STEPS)
    loaded_in_order([(s, args[0]) for s, (args, _) in zip(STEPS, used.calls)], setting)
    for (_, got_held, got_index, *env), _ in used.calls:
        pd.testing.assert_frame_equal(got_held, held)
        assert got_index == index
        if setting == "image":  # the dialog's own image among the others: the features dino_features wrote
            feats, image_row, _ = visual_inputs.features(params)
            assert torch.equal(env[0], feats) and env[1] == image_row
    study = "grounding" if setting == "childes" else "visual"
    written = pd.read_parquet(f"data/{study}/gain/{RUNS[setting][1]}.parquet")
    assert written["step"].tolist() == STEPS and set(written["seed"]) == {SEED}


def test_template_gain_reads_the_templates_under_the_childes_vocabulary(project, monkeypatch, capsys):
    params = project()
    _, targets, index = corpus_of("childes", params)
    logp = spy(monkeypatch, template_gain, "last_log_probs", lambda m, enc: np.zeros((len(enc), len(index))))
    gains = word_table().assign(template="t", s_matched=1.0, s_mismatched=1.25)
    table = spy(monkeypatch, template_gain, "template_gain_table", lambda *a: gains)
    ran(template_gain.main, ARGV, capsys)
    loaded_in_order([(s, args[0]) for s, (args, _) in zip(STEPS, logp.calls)], "childes")
    contexts = pd.read_parquet("data/grounding/templates.parquet")
    want = [encode(c, index) for c in contexts["context"]]
    assert all(args[1] == want for args, _ in logp.calls)
    template_ids = list(dict.fromkeys(contexts["template"]))
    assert len(template_ids) > 1 and all(args[1:] == (template_ids, targets) for args, _ in table.calls)


def test_lens_trains_on_training_windows_at_log_spaced_checkpoints(project, monkeypatch, capsys):
    params = project(grounding_lens={"n_checkpoints": 3, "kl_windows": 5})
    held, targets, index = corpus_of("childes", params)
    train = spy(monkeypatch, lens, "train_lens", lambda m, w, p: (object(), None))
    rows = spy(monkeypatch, lens, "lens_rows", lambda *a: pd.DataFrame({"layer": [0], "kl": [0.0]}))
    ran(lens.main, ARGV, capsys)
    # log-spaced over steps 1..40 (step 0 counted as 1): the first, the one nearest sqrt(40), the last
    assert [step_of(args[0], run_steps("childes")) for args, _ in train.calls] == [[0], [10], [40]]
    seq_len = params["grounding_train"]["seq_len"]
    windows = training_windows(inputs.turns(params), set(held["turn"]), index, seq_len, "k")[:, :-1]
    assert all(np.array_equal(args[1], windows) and args[2].n_checkpoints == 3 for args, _ in train.calls)
    pairs = evaluation_pairs(held, index)
    # per checkpoint, its model read out through the lens trained on it, then through none (the logit lens)
    models = [args[0] for args, _ in train.calls]
    fed = [(args[0], args[1]) for args, _ in rows.calls]
    assert fed == [x for m, (lens_, _) in zip(models, train.returned) for x in ((m, lens_), (m, None))]
    for (_, _, kl_windows, got_held, got_pairs), _ in rows.calls:
        assert np.array_equal(kl_windows, windows[:5])
        pd.testing.assert_frame_equal(got_held, held)
        assert (got_pairs.contexts, got_pairs.targets) == (pairs.contexts, pairs.targets)


# lens_rows on a tiny transformer of its own: three words with 3, 2 and 1 held-out contexts (so the mean of
# the words' means is not the mean over contexts), two mismatched contexts each, contexts of several lengths.
LENS_WORDS = ["ball", "cup", "ball", "dog", "cup", "ball"]
LENS_VOCAB = ["<unk>", "the", "see", "a", "<Q>", *(w + mark for w in ("ball", "cup", "dog") for mark in (ENV, LAN))]
LENS_LAYERS, LENS_D = 2, 16


@pytest.fixture(scope="module")
def lens_inputs(one_thread):
    """(model, trained-looking lens, KL windows, held-out set, its evaluation pairs)."""
    torch.manual_seed(0)
    config = dict(n_layers=LENS_LAYERS, d_model=LENS_D, n_heads=2, d_head=8, d_mlp=32, n_ctx=16)
    model = build_model("transformer", {**config, "d_vocab": len(LENS_VOCAB)}).eval()
    tuned = TunedLens(LENS_LAYERS, LENS_D)
    with torch.no_grad():
        for p in model.parameters():  # far from uniform predictions: the layers and contexts read apart
            p.add_(torch.randn_like(p))
        for p in tuned.parameters():
            p.normal_(0.0, 0.3)  # away from the identity: the tuned lens reads otherwise than the logit lens
    rng = np.random.default_rng(3)
    others = {"ball": ["cup", "dog"], "cup": ["dog", "ball"], "dog": ["ball", "cup"]}
    contexts = [
        [*rng.choice(["the", "see", "a", "<Q>"], 1 + i).tolist(), w + ENV, "the"] for i, w in enumerate(LENS_WORDS)
    ]
    held = pd.DataFrame(
        {"turn": range(10, 16), "word": LENS_WORDS, "context": contexts, "others": [others[w] for w in LENS_WORDS]}
    )
    index = {t: i for i, t in enumerate(LENS_VOCAB)}
    windows = rng.integers(0, len(LENS_VOCAB), (3, 9))
    return model, tuned, windows, held, evaluation_pairs(held, index)


def layer_readouts(model, tuned: TunedLens | None, tokens: list[int]) -> torch.Tensor:
    """(L + 1, T, V) log-probs of one token sequence: the residual entering each layer through the lens
    (h + A h + b; the logit lens when None) and the model's readout, then the model's own output."""
    names = [f"blocks.{l}.hook_resid_pre" for l in range(LENS_LAYERS)]
    with torch.no_grad():
        logits, cache = model.run_with_cache(torch.tensor([tokens]), names)
        out = []
        for l, name in enumerate(names):
            h = cache[name][0]
            if tuned is not None:
                t = tuned.translators[l]
                h = h + h @ t.weight.T + t.bias
            out.append(model.readout(h).log_softmax(-1))
        return torch.stack([*out, logits[0].log_softmax(-1)])


@pytest.mark.parametrize("readout", ["tuned", "logit"])
def test_lens_rows_average_each_layers_gain_over_words_and_read_its_kl_on_the_windows(readout, lens_inputs):
    model, tuned, windows, held, pairs = lens_inputs
    lens_ = tuned if readout == "tuned" else None
    got = lens.lens_rows(model, lens_, windows, held, pairs)
    # surprisal of each pair's target after its context's last token, layer by layer
    s = np.array(
        [
            [-float(layer_readouts(model, lens_, c)[l, -1, t]) for c, t in zip(pairs.contexts, pairs.targets)]
            for l in range(LENS_LAYERS + 1)
        ]
    )
    want = []
    for l in range(LENS_LAYERS + 1):
        per_word: dict[str, list] = {}
        for r, word in enumerate(LENS_WORDS):
            matched = [s[l, p] for p in range(len(pairs.targets)) if pairs.rows[p] == r and pairs.matched[p]]
            others = [s[l, p] for p in range(len(pairs.targets)) if pairs.rows[p] == r and not pairs.matched[p]]
            per_word.setdefault(word, []).append((matched[0], np.mean(others), np.mean(others) - matched[0]))
        means = np.array([np.mean(v, axis=0) for v in per_word.values()])  # (words, 3)
        want.append(means.mean(axis=0))
    kl = []
    for l in range(LENS_LAYERS):
        per_token = []
        for w in windows:
            logp = layer_readouts(model, lens_, w.tolist())
            per_token += (logp[-1].exp() * (logp[-1] - logp[l])).sum(-1).tolist()
        kl.append(np.mean(per_token))
    assert got.columns.tolist() == ["layer", "s_matched", "s_mismatched", "gain", "kl"]
    assert got["layer"].tolist() == list(range(LENS_LAYERS + 1))
    np.testing.assert_allclose(got[["s_matched", "s_mismatched", "gain"]].to_numpy(), np.array(want), rtol=0, atol=1e-5)
    np.testing.assert_allclose(got["kl"], [*kl, 0.0], rtol=0, atol=1e-6)  # the model's own output: no KL
    # the fixture lets the choices show: layers, words and contexts differ
    assert np.ptp(s, axis=0).min() > 0.1 and min(kl) > 0.1
    pooled = [np.mean([s[l, p] for p in range(len(pairs.targets)) if pairs.matched[p]]) for l in range(LENS_LAYERS + 1)]
    assert not np.allclose(pooled, np.array(want)[:, 0], atol=1e-4)


def saliency_rows(models, *rest) -> pd.DataFrame:
    return pd.DataFrame({"step": [s for s, _ in models], "layer": 0, "head": 0, "metric": "m", "value": 0.5})


@pytest.mark.parametrize("setting", ["childes", "image"])
def test_saliency_reads_the_matched_held_out_contexts_at_every_checkpoint(setting, project, monkeypatch, capsys):
    where = "grounding_saliency" if setting == "childes" else "visual_saliency"
    params = project(**{where: {"batch_size": 7}})
    call = spy_listing(monkeypatch, saliency, "saliency_table", saliency_rows)
    ran(saliency.main, ["--setting", setting, *ARGV], capsys)
    (models, contexts, targets, env_pos, batch, prefixes), _ = call.one
    loaded_in_order(models, setting)
    held, _, index = corpus_of(setting, params)
    want = matched_visual_inputs(setting, held, index, *visual_inputs.environment(params, setting))
    assert (contexts, targets, env_pos) == want[:3] and batch == 7
    assert (prefixes is None) == (setting == "childes")
    if setting == "image":
        assert torch.equal(prefixes, want[3])


@pytest.mark.parametrize("setting, baseline", [("childes", "none"), ("image", "init")])
def test_heads_are_found_in_the_runs_own_saliency_with_the_settings_threshold(
    setting, baseline, project, monkeypatch, capsys
):
    study, where = ("grounding", "grounding_heads") if setting == "childes" else ("visual", "visual_heads")
    project(**{where: {"threshold": 0.37}})
    keys = {} if setting == "childes" else {"setting": setting}
    for layer, run in enumerate((RUNS[setting][1], *RUNS[setting][2])):  # the layer tells the runs apart
        table = pd.DataFrame({"step": [0], "layer": [layer], "head": [1], "metric": ["m"], "value": [0.5]})
        write_parquet(table.assign(**keys, model="transformer4", seed=SEED), f"data/{study}/saliency/{run}.parquet")
    found = pd.DataFrame({**keys, "model": ["transformer4"], "seed": [SEED], "step": [0], "layer": [0], "head": [0]})
    analysis = spy(monkeypatch, heads, "find_heads", lambda *a: found.assign(kind="aggregate", share=0.5))
    ran(heads.main, ["--setting", setting, *ARGV], capsys)
    (got, threshold, got_baseline), _ = analysis.one
    assert got["layer"].tolist() == [0] and (threshold, got_baseline) == (0.37, baseline)


@pytest.mark.parametrize("setting", ["childes", "image"])
def test_ablation_zeroes_the_runs_own_heads_on_the_matched_contexts(setting, project, monkeypatch, capsys):
    study, where = ("grounding", "grounding_ablation") if setting == "childes" else ("visual", "visual_ablation")
    params = project(**{where: {"n_draws": 3, "seed": 9}})
    keys = {} if setting == "childes" else {"setting": setting}
    for layer, run in enumerate((RUNS[setting][1], *RUNS[setting][2])):  # the layer tells the runs apart
        table = pd.DataFrame({"step": [0], "layer": [layer], "head": [1], "kind": ["aggregate"]})
        write_parquet(table.assign(**keys, model="transformer4", seed=SEED), f"data/{study}/heads/{run}.parquet")
    answer = pd.DataFrame({"step": [0], "kind": ["aggregate"], "value": [1.0]})
    call = spy_listing(monkeypatch, ablation, "checkpoint_ablations", lambda *a: answer)
    ran(ablation.main, ["--setting", setting, *ARGV], capsys)
    (models, got_heads, contexts, targets, p, prefixes), _ = call.one
    loaded_in_order(models, setting)
    assert got_heads["layer"].tolist() == [0] and (p.n_draws, p.seed) == (3, 9)
    held, _, index = corpus_of(setting, params)
    want = matched_visual_inputs(setting, held, index, *visual_inputs.environment(params, setting))
    assert (contexts, targets) == want[:2] and (prefixes is None) == (setting == "childes")
    if setting == "image":
        assert torch.equal(prefixes, want[3])


def test_llc_samples_every_kth_checkpoint_on_the_training_windows(project, monkeypatch, capsys):
    params = project(llc={"every": 2})
    call = spy_listing(monkeypatch, llc, "llc_table", lambda ckpts, *rest: pd.DataFrame({"step": [0]}))
    ran(llc.main, ARGV, capsys)
    (ckpts, rows, loss_fn, p, seed), _ = call.one
    assert [s for s, _ in ckpts] == [0, 3, 40] and seed == SEED and p.every == 2
    assert all(step_of(model, run_steps("childes")) == [s] for s, model in ckpts)
    held, _, index = corpus_of("childes", params)
    seq_len = params["grounding_train"]["seq_len"]
    windows = training_windows(inputs.turns(params), set(held["turn"]), index, seq_len, "k")
    assert torch.equal(rows, torch.as_tensor(windows, dtype=torch.long))
