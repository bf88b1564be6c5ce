"""bench/visual_probe.py: the labels read from the captions; the ridge scores against the same ridge
solved apart (an augmented least-squares system, its intercept unpenalised); the penalty picked by
cross-validation, through scores scripted per penalty; the probe's split, majority baseline and two
readouts, through recording stand-ins, and on features that plant the answer; the across-image share on
features of a known split; the features one row per distinct image; every encoder layer read batch by
batch; and what main prints, from stand-ins of the grounding inputs."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import help_text, summary_line
from refusals import refuses

from bench import visual_probe
from emergence.studies.grounding.encoder_params import EncoderParams

# --- labels ----------------------------------------------------------------


def test_labels_say_which_targets_each_images_caption_names():
    dialogs = pd.DataFrame(
        {
            "image_id": np.array([7, 3, 9], dtype=np.int64),
            "env": [["dog<ENV>", "sun<ENV>"], ["cat<ENV>"], []],
        }
    )
    got = visual_probe.labels(dialogs, [9, 7, 3, 7], ["cat", "dog", "sun", "sky"])
    assert got.dtype == bool
    assert got.tolist() == [
        [False, False, False, False],
        [False, True, True, False],
        [True, False, False, False],
        [False, True, True, False],
    ]


# --- ridge_scores ----------------------------------------------------------


def ridge_apart(x_fit, y_fit, x_out, penalty):
    """min over (b, w) of mean((y - b - z w)^2) + penalty |w|^2, z the standardised features: the
    augmented least-squares system [1 z; 0 sqrt(n penalty) I] (b, w) = (y, 0)."""
    n, d = x_fit.shape
    mean, std = x_fit.mean(0), x_fit.std(0)
    z, z_out = (x_fit - mean) / std, (x_out - mean) / std
    a = np.block([[np.ones((n, 1)), z], [np.zeros((d, 1)), np.sqrt(n * penalty) * np.eye(d)]])
    rhs = np.vstack([y_fit, np.zeros((d, y_fit.shape[1]))])
    coef = np.linalg.lstsq(a, rhs, rcond=None)[0]
    return coef[0] + z_out @ coef[1:]


@pytest.mark.parametrize("penalty", [0.1, 10.0])
def test_ridge_scores_are_the_penalised_least_squares_fit_of_the_standardised_features(penalty):
    rng = np.random.default_rng(0)
    x_fit = rng.normal(3.0, [0.5, 2.0, 4.0, 1.0, 0.2, 3.0, 1.5], (6, 7))  # fewer images than dimensions
    y_fit = rng.integers(0, 2, (6, 3)).astype(float)
    y_fit[:, 2] = [1, 1, 1, 1, 1, 0]
    x_out = rng.normal(3.0, 2.0, (4, 7))
    got = visual_probe.ridge_scores(x_fit, y_fit, x_out, penalty)
    assert got.shape == (4, 3)
    assert np.allclose(got, ridge_apart(x_fit, y_fit, x_out, penalty), atol=1e-6)
    assert np.allclose(visual_probe.ridge_scores(x_fit, y_fit, x_fit[:2], 1e9), y_fit.mean(0), atol=1e-6)


def test_a_constant_feature_is_left_out_not_divided_by_zero():
    x = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]])
    y = np.array([[0.0], [0.0], [1.0]])
    got = visual_probe.ridge_scores(x, y, np.array([[2.0, 5.0]]), 0.5)
    assert np.allclose(got, ridge_apart(x[:, :1], y, np.array([[2.0]]), 0.5))


# --- pick_penalty ----------------------------------------------------------


class Scores:
    """ridge_scores replaced: a score per (penalty, row) of the held-out rows, every call recorded.
    Row i of x is [i, i]: the rows a call got tell which images it fitted and scored."""

    def __init__(self, by_penalty):
        self.by_penalty, self.calls = by_penalty, []

    def __call__(self, x_fit, y_fit, x_out, penalty):
        self.calls.append((x_fit[:, 0].astype(int).tolist(), y_fit.copy(), x_out[:, 0].astype(int).tolist(), penalty))
        return np.array([[self.by_penalty[penalty](int(i))] for i in x_out[:, 0]])


def cross_validate(monkeypatch, by_penalty, y):
    scores = Scores(by_penalty)
    monkeypatch.setattr(visual_probe, "ridge_scores", scores)
    x = np.repeat(np.arange(len(y), dtype=float)[:, None], 2, axis=1)
    return visual_probe.pick_penalty(x, y, np.random.default_rng(4)), scores.calls


def test_pick_penalty_fits_5_folds_that_split_the_images_and_keeps_the_most_accurate(monkeypatch):
    y = np.array([[1.0], [0.0], [1.0], [1.0], [0.0], [0.0], [1.0], [0.0], [1.0], [1.0], [0.0], [1.0]])
    right = {0.1: lambda i: 0.2, 1.0: lambda i: 0.9, 10.0: lambda i: float(y[i, 0]), 100.0: lambda i: 0.6}
    right[1000.0] = lambda i: 1.0 - y[i, 0]
    picked, calls = cross_validate(monkeypatch, right, y)
    assert picked == 10.0  # right on every image
    assert [c[3] for c in calls] == [p for p in visual_probe.PENALTIES for _ in range(5)]
    for k in range(0, 25, 5):
        folds = [c[2] for c in calls[k : k + 5]]
        assert sorted(i for f in folds for i in f) == list(range(12)) and sorted(map(len, folds)) == [2, 2, 2, 3, 3]
        for fit, y_fit, held_out, _ in calls[k : k + 5]:
            assert fit == sorted(set(range(12)) - set(held_out)) and y_fit.tolist() == y[fit].tolist()
    assert [c[2] for c in calls[:5]] == [c[2] for c in calls[5:10]]  # the same folds for every penalty


def test_pick_penalty_a_score_of_exactly_one_half_says_absent_and_ties_go_to_the_smallest(monkeypatch):
    y = np.zeros((10, 1))
    half = {p: (lambda i: 0.5) for p in visual_probe.PENALTIES}
    half[100.0] = lambda i: 0.2
    picked, _ = cross_validate(monkeypatch, half, y)
    assert picked == 0.1  # right everywhere, as are all the others


def test_pick_penalty_averages_the_accuracies_of_the_folds(monkeypatch):
    """11 images in folds of 3, 2, 2, 2, 2. One image wrong in the fold of 3 scores (2/3 + 4) / 5 = 0.933,
    in a fold of 2 (1/2 + 4) / 5 = 0.9: the first wins, though both are 10 of 11 images pooled."""
    y = np.zeros((11, 1))
    _, calls = cross_validate(monkeypatch, {p: (lambda i: 0.0) for p in visual_probe.PENALTIES}, y)
    folds = sorted((c[2] for c in calls[:5]), key=len)
    in_two, in_three = folds[0][0], folds[-1][0]
    scores = {p: (lambda i: 1.0) for p in visual_probe.PENALTIES}  # wrong everywhere
    scores[0.1] = lambda i: float(i == in_two)
    scores[1.0] = lambda i: float(i == in_three)
    picked, _ = cross_validate(monkeypatch, scores, y)
    assert picked == 1.0


# --- probe -----------------------------------------------------------------


N, P, D = 12, 3, 2


def features() -> np.ndarray:
    """Image i: [i, position p + 10 i] at each position p, so the pooled row is [i, 1 + 10 i]."""
    x = np.zeros((N, P, D))
    x[:, :, 0] = np.arange(N)[:, None]
    x[:, :, 1] = np.arange(P)[None, :] + 10 * np.arange(N)[:, None]
    return x


@pytest.fixture
def stand_ins(monkeypatch):
    """pick_penalty and ridge_scores recorded; the scores of image i for noun j are SCORES[i, j]."""
    calls = {"pick": [], "ridge": []}

    def pick(x, y, rng):
        calls["pick"].append((x.copy(), y.copy(), rng.bit_generator.state))
        return 10.0 if x.shape[1] == D else 100.0

    def ridge(x_fit, y_fit, x_out, penalty):
        calls["ridge"].append((x_fit.copy(), y_fit.copy(), x_out.copy(), penalty))
        return SCORES[x_out[:, 0].astype(int)] if x_out.shape[1] == D else 1.0 - SCORES[x_out[:, 0].astype(int)]

    monkeypatch.setattr(visual_probe, "pick_penalty", pick)
    monkeypatch.setattr(visual_probe, "ridge_scores", ridge)
    return calls


SCORES = np.random.default_rng(9).uniform(0, 1, (N, 3))
SCORES[:, 2] = 0.5  # exactly one half: absent


def split_of(calls) -> tuple[list[int], list[int]]:
    x_fit, _, x_out, _ = calls["ridge"][0]
    return x_fit[:, 0].astype(int).tolist(), x_out[:, 0].astype(int).tolist()


def test_probe_splits_70_30_fits_on_the_70_and_scores_the_30(stand_ins):
    x = features()
    visual_probe.probe(x, np.zeros((N, 3), dtype=bool), seed=3)
    fit, test = split_of(stand_ins)
    assert len(fit) == 8 and len(test) == 4 and sorted(fit + test) == list(range(N))  # int(0.7 * 12) = 8
    rng = np.random.default_rng(3)
    rng.permutation(N)
    (pooled_x, _, first_state), (flat_x, _, _) = stand_ins["pick"]
    assert first_state == rng.bit_generator.state  # the folds come from the probe's own generator, after the split
    assert pooled_x.tolist() == [[i, 1 + 10 * i] for i in fit]  # averaged over positions
    assert flat_x.tolist() == [x[i].reshape(-1).tolist() for i in fit]  # all positions side by side
    (fx, _, ox, p1), (fx2, _, ox2, p2) = stand_ins["ridge"]
    assert (p1, p2) == (10.0, 100.0)  # each readout scored with the penalty picked for it
    assert ox.tolist() == [[i, 1 + 10 * i] for i in test] and ox2.tolist() == [x[i].reshape(-1).tolist() for i in test]
    visual_probe.probe(x, np.zeros((N, 3), dtype=bool))
    visual_probe.probe(x, np.zeros((N, 3), dtype=bool), seed=0)
    assert stand_ins["ridge"][2][2].tolist() == stand_ins["ridge"][4][2].tolist()  # seed 0 by default
    assert stand_ins["ridge"][2][2].tolist() != ox.tolist()


def test_probe_reports_presence_the_majority_baseline_and_each_readouts_test_accuracy(stand_ins):
    x = features()
    visual_probe.probe(x, np.zeros((N, 3), dtype=bool), seed=3)
    fit, test = split_of(stand_ins)
    stand_ins["ridge"].clear()
    stand_ins["pick"].clear()
    y = np.zeros((N, 3), dtype=bool)
    y[fit[:4], 0] = True  # half the fitted images: the majority says present
    y[fit[:3], 1] = True  # 3 of 8: absent
    y[test[:1], 1] = True
    y[test[:3], 2] = True
    y[fit[:6], 2] = True  # 6 of 8: present
    table = visual_probe.probe(x, y, seed=3)
    assert list(table.columns) == ["present", "majority", "pooled", "positions"]
    assert table["present"].tolist() == y.sum(0).tolist() == [4, 4, 9]
    majority = [True, False, True]
    assert table["majority"].tolist() == [float(np.mean(y[test, j] == majority[j])) for j in range(3)]
    assert stand_ins["pick"][0][1].tolist() == y[fit].astype(float).tolist()
    assert stand_ins["ridge"][0][1].tolist() == y[fit].astype(float).tolist()
    pooled = [float(np.mean((SCORES[test, j] > 0.5) == y[test, j])) for j in range(3)]
    positions = [float(np.mean((1.0 - SCORES[test, j] > 0.5) == y[test, j])) for j in range(3)]
    assert table["pooled"].tolist() == pooled and table["positions"].tolist() == positions
    assert pooled[2] == 0.25  # 0.5 is absent: right on the one test image without the noun


def test_probe_finds_a_noun_the_features_encode_and_not_one_they_do_not():
    rng = np.random.default_rng(2)
    n = 60
    y = np.stack([rng.uniform(size=n) < 0.4, rng.uniform(size=n) < 0.4], axis=1)
    x = rng.normal(0, 1, (n, 2, 4))
    x[:, 1, 2] += 20.0 * y[:, 0]  # noun 0 at one position of one dimension
    table = visual_probe.probe(x, y, seed=1)
    assert table.loc[0, "pooled"] == 1.0 and table.loc[0, "positions"] == 1.0
    assert table.loc[0, "majority"] < 0.9 and table.loc[1, "pooled"] < 0.9


# --- across_image_share ----------------------------------------------------


def test_across_image_share_is_the_spread_across_images_over_the_whole_spread():
    a = np.array([-1.0, 1.0])[:, None, None]  # per image: std 1
    b = np.array([[-1.0, 1.0], [1.0, -1.0]])[None]  # per position and dimension: std 1
    assert visual_probe.across_image_share(a + b) == pytest.approx(1 / np.sqrt(2))
    assert visual_probe.across_image_share(a + 0 * b) == pytest.approx(1.0)
    assert visual_probe.across_image_share(np.repeat(b, 3, axis=0)) == 0.0
    c = np.array([0.0, 0.0, 3.0])[:, None, None] + np.zeros((3, 1, 2))  # std sqrt(2) per cell and overall
    assert visual_probe.across_image_share(c + np.array([[[0.0, 4.0]]])) == pytest.approx(np.sqrt(2) / np.sqrt(6))


# --- artifact_features -----------------------------------------------------


FEATS = torch.arange(5 * 2 * 3, dtype=torch.float32).reshape(5, 2, 3) / 7


@pytest.fixture
def artifact(tmp_path, monkeypatch):
    """Five feature rows; images.parquet out of order, two images drawn twice (the same sha256)."""
    folder = tmp_path / "visual_features"
    folder.mkdir()
    images = pd.DataFrame(
        {
            "row": np.array([0, 1, 2, 3, 4], dtype=np.int64),
            "image_id": np.array([30, 10, 20, 40, 15], dtype=np.int64),
            "sha256": ["x", "y", "x", "z", "y"],
        }
    )
    images.to_parquet(folder / "images.parquet")
    seen = []
    features = lambda params: seen.append(params) or (FEATS, {}, {"encoder_id": "enc-7", "pretrained": True})  # noqa: E731
    monkeypatch.setattr(visual_probe, "inputs", SimpleNamespace(features=features))
    return {"paths": {"visual_features": str(folder)}}, seen


def test_artifact_features_keep_one_row_per_distinct_image_the_lowest_image_id(artifact):
    params, seen = artifact
    x, ids = visual_probe.artifact_features(params)
    assert seen == [params]
    assert ids == [10, 20, 40]
    assert x.dtype == np.float64 and np.array_equal(x, FEATS[[1, 2, 3]].double().numpy())


def test_artifact_features_name_an_images_table_without_hashes(artifact):
    params, _ = artifact
    path = f"{params['paths']['visual_features']}/images.parquet"
    pd.read_parquet(path).drop(columns="sha256").to_parquet(path)
    with refuses(path, "sha256"):
        visual_probe.artifact_features(params)


# --- layer_features --------------------------------------------------------


@pytest.fixture
def encoder(monkeypatch):
    """The encoder's pieces replaced: image f is a tensor [f, size]; layer l of a batch is the batch
    times (l + 1), as (B, 2 positions, 2 dims)."""
    calls = {"load": [], "find": [], "image": [], "layers": []}

    def load_encoder(p):
        calls["load"].append(p)
        warnings.warn("random init", UserWarning, stacklevel=1)
        return "the encoder"

    def find_images(folder, image_ids):
        calls["find"].append((str(folder), list(image_ids)))
        return [float(i) for i in image_ids]

    def load_image(f, size):
        calls["image"].append((f, size))
        return torch.tensor([f, float(size)])

    def encoder_layers(enc, batch, pool_grid):
        calls["layers"].append((enc, batch.shape[0], pool_grid))
        return [(batch[:, None, :] * (k + 1)).repeat(1, 2, 1) for k in range(3)]

    for name, fn in [("load_encoder", load_encoder), ("find_images", find_images), ("load_image", load_image)]:
        monkeypatch.setattr(visual_probe, name, fn)
    monkeypatch.setattr(visual_probe, "encoder_layers", encoder_layers)
    return calls


DINO = {"batch_size": 3, "image_size": 28, "pool_grid": 2, "allow_random_init": True}


def test_layer_features_encode_the_images_in_batches_and_stack_each_layer(encoder):
    params = {"dino_features": DINO, "paths": {"visual_images": "/data/images"}}
    ids = [11, 5, 23, 8, 2, 40, 7]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layers = visual_probe.layer_features(params, ids)
    assert caught == []  # the random-init warning is the stage's to record, not the probe's to repeat
    assert encoder["load"] == [EncoderParams(batch_size=3, image_size=28, pool_grid=2, allow_random_init=True)]
    assert encoder["find"] == [("/data/images", ids)]
    assert encoder["image"] == [(float(i), 28) for i in ids]
    assert encoder["layers"] == [("the encoder", 3, 2), ("the encoder", 3, 2), ("the encoder", 1, 2)]
    assert len(layers) == 3
    for k, layer in enumerate(layers):
        assert layer.dtype == np.float64 and layer.shape == (7, 2, 2)
        assert layer[:, 0, :].tolist() == [[(k + 1) * i, (k + 1) * 28] for i in ids]


def test_layer_features_name_a_bad_dino_features_key(encoder):
    with refuses("dino_features.batch_size"):
        visual_probe.layer_features({"dino_features": {**DINO, "batch_size": 0}, "paths": {}}, [1])


# --- main ------------------------------------------------------------------


TARGETS = ["cat", "dog", "sun"]


@pytest.fixture
def grounding(artifact, tmp_path, monkeypatch):
    """params.yaml, the artifact above, the captions and a probe stand-in recording what it was given."""
    params, _ = artifact
    dialogs = pd.DataFrame(
        {
            "image_id": [10, 15, 20, 30, 40],
            "env": [["dog<ENV>"], ["cat<ENV>"], ["cat<ENV>", "sun<ENV>"], [], ["sun<ENV>"]],
        }
    )
    record = {"encoder_id": "enc-7", "pretrained": False}

    def given(value):
        """An input read from the params main was given (the artifact's folder says which)."""
        return lambda p: value if p["paths"] == params["paths"] else pytest.fail(f"other params: {p}")

    monkeypatch.setattr(
        visual_probe,
        "inputs",
        SimpleNamespace(
            features=given((FEATS, {}, record)), vocab_index=given((TARGETS, {"cat": 0})), dialogs=given(dialogs)
        ),
    )
    probed, threads = [], []

    def fake_probe(x, y):
        probed.append((x, y))
        k = len(probed)
        return pd.DataFrame(
            {
                "present": [1, 2, 3],
                "majority": [0.5, 0.25, 1.0],
                "pooled": [0.125 * k, 0.5, 0.75],
                "positions": [1.0, 0.0, 0.5 + 0.1 * k],
            }
        )

    monkeypatch.setattr(visual_probe, "probe", fake_probe)
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({**params, "base": {"threads": 3}}))
    return path, record, probed, threads


def test_main_prints_each_nouns_probe_their_mean_and_the_across_image_share(grounding, capsys):
    path, record, probed, threads = grounding
    visual_probe.main(["--params", str(path)])
    out = capsys.readouterr().out.splitlines()
    assert threads == [3]
    ((x, y),) = probed
    assert np.array_equal(x, FEATS[[1, 2, 3]].double().numpy())  # images 10, 20, 40
    assert y.tolist() == [[False, True, False], [True, False, True], [False, False, True]]
    assert out[0] == "3 images, 3 target nouns, encoder enc-7 (encoder not pretrained)"
    assert out[1].split() == ["present", "majority", "pooled", "positions"]
    rows = {line.split()[0]: [float(v) for v in line.split()[1:]] for line in out[2:6]}
    assert rows == {
        "cat": [1.0, 0.5, 0.125, 1.0],
        "dog": [2.0, 0.25, 0.5, 0.0],
        "sun": [3.0, 1.0, 0.75, 0.6],
        "mean": [2.0, 0.583, 0.458, 0.533],
    }
    assert "0.125" in out[2] and "0.583" in out[5]  # three decimals
    share = np.asarray(x).std(0).mean() / np.asarray(x).std()
    assert out[6] == f"share of the features' spread across images: {share:.3f}" and len(out) == 7


def test_main_reads_params_yaml_by_default_says_nothing_of_a_pretrained_encoder_and_takes_2_threads(
    grounding, capsys, monkeypatch
):
    path, record, _, threads = grounding
    record["pretrained"] = True
    params = yaml.safe_load(path.read_text())
    params["base"] = {}
    path.write_text(yaml.safe_dump(params))
    monkeypatch.chdir(path.parent)
    visual_probe.main([])
    assert capsys.readouterr().out.splitlines()[0] == "3 images, 3 target nouns, encoder enc-7"
    assert threads == [2]


def test_main_layers_probes_every_encoder_layer(grounding, monkeypatch, capsys):
    path, _, probed, _ = grounding
    same_for_all = np.zeros((3, 1, 1)) + np.array([[[0, 1], [2, 3]]])  # no spread across images
    layers = [same_for_all, np.array([-1.0, 1.0, 1.0])[:, None, None] + np.array([[[0, 0], [2, -2]]])]
    asked = []
    monkeypatch.setattr(visual_probe, "layer_features", lambda params, ids: asked.append((params, ids)) or layers)
    visual_probe.main(["--params", str(path), "--layers"])
    out = capsys.readouterr().out.splitlines()
    assert asked == [(yaml.safe_load(path.read_text()), [10, 20, 40])]
    assert [p[0] is layer for p, layer in zip(probed, layers)] == [True, True]
    assert [p[1].tolist() for p in probed] == [[[False, True, False], [True, False, True], [False, False, True]]] * 2
    assert out[1].split() == ["layer", "across_images", "majority", "pooled", "positions"]
    share1 = layers[1].std(0).mean() / layers[1].std()
    assert [line.split() for line in out[2:]] == [
        ["0", "0.000", "0.583", "0.458", "0.533"],
        ["1", f"{share1:.3f}", "0.583", "0.500", "0.567"],
    ]


def test_help_names_the_flags(capsys):
    out = help_text(lambda: visual_probe.main(["--help"]), capsys)
    assert summary_line(visual_probe) in out
    assert "--params PARAMS" in out and "--layers probe every encoder layer (encodes again)" in out
