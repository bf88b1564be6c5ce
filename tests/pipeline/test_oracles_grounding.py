"""Oracles for the grounding study's headline numbers (text and visual dialogue), recomputed from the
finished tiny run's raw artifacts and compared with reports/metrics/{grounding,grounding_visual}.json
and the index's readers (emergence.claims).

The second way: surprisals are read from the final checkpoints one context at a time (no padding, no
batching); G is the mean over words of each word's mean gain (docs/grounding.md); the one-sided
sign-flip p is computed exactly, by enumerating every sign pattern of the words' gains, where the
pipeline draws 10,000 random flips (so the two agree to within the draw's error)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from safetensors.numpy import load_file

from emergence.claims import CLAIMS, FIGURES, GROUNDING, VISUAL
from emergence.core.train.checkpoint import load_checkpoint

pytestmark = pytest.mark.pipeline

P_DRAWS = 0.02  # the pipeline's Monte Carlo p (10,000 flips) against the exact one: sd <= 0.005


# ---- helpers ----------------------------------------------------------------------------------


def params(run: Path) -> dict:
    return yaml.safe_load((run / "params.yaml").read_text())


def path(run: Path, key: str) -> Path:
    return run / params(run)["paths"][key]


def metrics(run: Path, key: str) -> dict:
    return json.loads(path(run, key).read_text())


def claim(study: str, where: str):
    (c,) = [c for c in CLAIMS if c.study == study and c.where.startswith(where)]
    return c


def figure(study: str, where: str):
    (f,) = [f for f in FIGURES if f.study == study and f.where == where]
    return f


def final_checkpoint(run_dir: Path) -> tuple[int, Path]:
    found = {int(m.group(1)): p for p in run_dir.iterdir() if (m := re.fullmatch(r"step(\d+)", p.name))}
    assert found, f"no checkpoints in {run_dir}"
    return max(found), found[max(found)]


def exact_sign_flip_p(diffs: np.ndarray) -> float:
    """P(mean of the |diffs| under random signs >= the observed mean), over all 2^n sign patterns."""
    diffs = np.asarray(diffs, dtype=float)
    assert 0 < len(diffs) <= 16, "exact enumeration is for small samples"
    observed = diffs.mean()
    null = [np.mean(np.array(signs) * np.abs(diffs)) for signs in itertools.product((-1.0, 1.0), repeat=len(diffs))]
    return float(np.mean(np.array(null) >= observed - 1e-12))


@torch.no_grad()
def log_probs(model: torch.nn.Module, contexts: list[list[int]]) -> np.ndarray:
    """(N, V) ln p(. | context), read after each context's last token, one context at a time."""
    out = []
    for ids in contexts:
        logits = model(torch.tensor([ids]))
        logits = logits[0] if isinstance(logits, tuple) else logits
        out.append(torch.log_softmax(logits[0, -1].double(), dim=-1).numpy())
    return np.stack(out)


def vocab(run: Path, key: str) -> tuple[list[str], dict[str, int]]:
    v = json.loads(path(run, key).read_text())
    return v["targets"], {tok: i for i, tok in enumerate(v["vocab"])}


def ids(tokens, index: dict[str, int]) -> list[int]:
    return [index.get(t, index["<unk>"]) for t in tokens]


# ---- template G, text setting -------------------------------------------------------------------


def template_gains(run: Path, run_dir: Path) -> pd.DataFrame:
    """Per (template, v): s(v<LAN> | template with v<ENV>), the mean over u != v of s(v<LAN> | template
    with u<ENV>), and their difference, from the final checkpoint."""
    targets, index = vocab(run, "grounding_vocab")
    table = pd.read_parquet(path(run, "grounding_templates"))
    model, _ = load_checkpoint(final_checkpoint(run_dir)[1])
    rows = []
    for template, g in table.groupby("template", sort=False):
        assert list(g["word"]) == list(dict.fromkeys(g["word"])) and set(g["word"]) == set(targets)
        lp = dict(zip(g["word"], log_probs(model, [ids(c, index) for c in g["context"]])))  # u -> (V,)
        for v in targets:
            s = {u: -lp[u][index[v + "<LAN>"]] for u in targets}  # s(v<LAN> | template with u<ENV>)
            mismatched = np.mean([s[u] for u in targets if u != v])
            rows.append(
                dict(template=template, word=v, s_matched=s[v], s_mismatched=mismatched, gain=mismatched - s[v])
            )
    return pd.DataFrame(rows)


def gain_summary(rows: pd.DataFrame) -> tuple[float, float]:
    """(G, p): G(v) the mean gain of each word, G their mean, p the exact one-sided sign-flip p over words."""
    per_word = rows.groupby("word")["gain"].mean().to_numpy()
    return float(per_word.mean()), exact_sign_flip_p(per_word)


@pytest.fixture(scope="module")
def template_runs(tiny_run, one_thread) -> dict[str, pd.DataFrame]:
    runs = path(tiny_run, "grounding_runs")
    out = {}
    for model in params(tiny_run)["grounding_runs"]["models"]:
        for seed in params(tiny_run)["grounding_runs"]["seeds"]:
            out.setdefault(model, []).append(template_gains(tiny_run, runs / f"{model}_seed{seed}").assign(seed=seed))
    return {model: pd.concat(tables, ignore_index=True) for model, tables in out.items()}


def test_template_table_at_the_last_checkpoint_is_the_models_own_surprisal(tiny_run, template_runs):
    """The per-item table the figures average: its final-step rows are the final checkpoint's surprisals,
    and its earlier steps differ (the choice of checkpoint is visible)."""
    runs = path(tiny_run, "grounding_runs")
    for model, mine in template_runs.items():
        for seed, own in mine.groupby("seed"):
            final, _ = final_checkpoint(runs / f"{model}_seed{seed}")
            table = pd.read_parquet(path(tiny_run, "grounding_template_gain") / f"{model}_seed{seed}.parquet")
            assert table["step"].max() == final
            last = table[table["step"] == final].merge(own, on=["template", "word"], suffixes=("", "_mine"))
            assert len(last) == len(own)
            for col in ("s_matched", "s_mismatched", "gain"):
                assert np.allclose(last[col], last[f"{col}_mine"], atol=2e-4), (model, col)
            earlier = table[table["step"] < final]
            assert not np.allclose(earlier.groupby("step")["s_matched"].mean(), last["s_matched"].mean(), atol=1e-4)


@pytest.mark.parametrize("model", ["transformer4", "mamba4", "lstm4"])
def test_template_G_and_its_one_sided_p_per_architecture(tiny_run, template_runs, model):
    if model not in template_runs:
        pytest.skip(f"{model} is not trained at this profile")
    m = metrics(tiny_run, "grounding_metrics")
    G, p = gain_summary(template_runs[model])
    got = m["template_gain"][model]
    assert got["G"] == pytest.approx(G, abs=2e-5)
    assert figure(GROUNDING, f"template_gain.{model}.G").read(m) == pytest.approx(G, abs=2e-5)
    assert got["p_value"] == pytest.approx(p, abs=P_DRAWS)
    assert claim(GROUNDING, f"template_gain.{model}.p_value").read(m) == pytest.approx(p, abs=P_DRAWS)
    words = template_runs[model].groupby("word")[["s_matched", "s_mismatched"]].mean().mean()
    assert got["s_matched"] == pytest.approx(words["s_matched"], abs=2e-4)
    assert got["s_mismatched"] == pytest.approx(words["s_mismatched"], abs=2e-4)


# ---- head ablation --------------------------------------------------------------------------------


def ablation_summary(table: pd.DataFrame) -> dict:
    """At the last checkpoint, aggregate heads: their count (mean over seeds), matched surprisal with
    nothing, the heads, or as many random same-layer heads zeroed (means over the runs that have such
    heads, else the original over all), exact sign-flip p of intervention > control over (seed, context)."""
    last = table[(table["step"] == table["step"].max()) & (table["kind"] == "aggregate")]
    heads = float(np.mean([g["n_heads"].iloc[0] for _, g in last.groupby("seed")]))
    with_heads = last[last["n_heads"] > 0]
    paired = with_heads.dropna(subset=["control"])
    return {
        "heads (mean)": heads,
        "original": float((with_heads if len(with_heads) else last)["original"].mean()),
        "intervention": float(with_heads["intervention"].mean()) if len(with_heads) else None,
        "control": float(with_heads["control"].mean()) if len(with_heads) else None,
        "p (intervention > control)": exact_sign_flip_p((paired["intervention"] - paired["control"]).to_numpy())
        if len(paired) else None,
    }  # fmt: skip


def assert_ablation(got: dict, expected: dict) -> None:
    for key, value in expected.items():
        tolerance = P_DRAWS if key.startswith("p ") else 2e-5
        assert got[key] == (None if value is None else pytest.approx(value, abs=tolerance)), key


def test_aggregate_head_ablation_at_the_last_checkpoint(tiny_run):
    m = metrics(tiny_run, "grounding_metrics")
    table = pd.concat(pd.read_parquet(f) for f in sorted(path(tiny_run, "grounding_ablation").glob("*.parquet")))
    table = table[table["model"] == "transformer4"]
    expected = ablation_summary(table)
    assert_ablation(m["ablation"]["transformer4_aggregate"], expected)
    value = claim(GROUNDING, "ablation.transformer4_aggregate").read(m)
    p = expected["p (intervention > control)"]
    assert value == (None if p is None else pytest.approx(p, abs=P_DRAWS))
    for key in ("heads (mean)", "original", "intervention", "control"):
        read = figure(GROUNDING, "ablation.transformer4_aggregate" + ("" if key == "heads (mean)" else f".{key}"))
        assert read.read(m) == (None if expected[key] is None else pytest.approx(expected[key], abs=2e-5)), key


def test_visual_aggregate_head_ablation_per_setting(tiny_run):
    m = metrics(tiny_run, "visual_metrics")
    for f in sorted(path(tiny_run, "visual_ablation").glob("*.parquet")):
        table = pd.read_parquet(f)
        for (setting, model), g in table.groupby(["setting", "model"]):
            assert_ablation(m["ablation"][f"{setting}_{model}_aggregate"], ablation_summary(g))


# ---- visual dialogue G --------------------------------------------------------------------------


def visual_surprisals(run: Path, model, setting: str, row) -> np.ndarray:
    """s(v<LAN>) of one held-out dialog: matched first, then each mismatch. Caption setting: the
    context with v<ENV>, then with each other target's u<ENV> swapped in. Image setting: the dialog
    without its caption after its own image's features (a prefix), then after each other image's."""
    _, index = vocab(run, "visual_vocab")
    target = index[row.word + "<LAN>"]
    if setting == "caption":
        env = row.word + "<ENV>"
        variants = [list(row.context)] + [[u + "<ENV>" if t == env else t for t in row.context] for u in row.others]
        return -log_probs(model, [ids(c, index) for c in variants])[:, target]
    features = load_file(str(path(run, "visual_features") / "features.safetensors"))["features"]
    images = pd.read_parquet(path(run, "visual_features") / "images.parquet").set_index("image_id")["row"]
    out = []
    with torch.no_grad():
        for image in [row.image_id, *row.other_images]:
            prefix = torch.from_numpy(features[images[int(image)]][None].astype(np.float32))
            logits = model(torch.tensor([ids(row.image_context, index)]), prefix=prefix)
            logits = logits[0] if isinstance(logits, tuple) else logits
            out.append(-float(torch.log_softmax(logits[0, -1].double(), dim=-1)[target]))
    return np.array(out)


@pytest.mark.parametrize("setting", ["caption", "image"])
def test_visual_gain_table_is_the_final_checkpoints_surprisal(tiny_run, one_thread, setting):
    evals = pd.read_parquet(path(tiny_run, "visual_eval"))
    run_dirs = sorted(path(tiny_run, "visual_runs").glob(f"{setting}_*_seed*"))
    if not run_dirs:
        pytest.skip(f"no {setting} setting at this profile")
    for run_dir in run_dirs:
        final, step_dir = final_checkpoint(run_dir)
        model, _ = load_checkpoint(step_dir)
        table = pd.read_parquet(path(tiny_run, "visual_gain") / f"{run_dir.name}.parquet")
        assert table["step"].max() == final
        last = table[table["step"] == final].sort_values("context").reset_index(drop=True)
        assert len(last) == len(evals)
        for i, row in enumerate(evals.itertuples()):
            s = visual_surprisals(tiny_run, model, setting, row)
            assert last.loc[i, "word"] == row.word
            assert last.loc[i, "s_matched"] == pytest.approx(s[0], abs=2e-4)
            assert last.loc[i, "s_mismatched"] == pytest.approx(s[1:].mean(), abs=2e-4)


@pytest.mark.parametrize("setting", ["caption", "image"])
def test_visual_G_and_its_one_sided_p_from_the_per_dialog_table(tiny_run, setting):
    m = metrics(tiny_run, "visual_metrics")
    files = sorted(path(tiny_run, "visual_gain").glob(f"{setting}_transformer4_seed*.parquet"))
    if not files:
        pytest.skip(f"no {setting} setting at this profile")
    table = pd.concat(pd.read_parquet(f) for f in files)
    last = table[table["step"] == table["step"].max()]
    assert (last["gain"] - (last["s_mismatched"] - last["s_matched"])).abs().max() < 1e-6
    # G(v) averaged over each seed's contexts, then over seeds; G over words
    per_word = last.groupby(["word", "seed"])["gain"].mean().groupby("word").mean().to_numpy()
    G, p = float(per_word.mean()), exact_sign_flip_p(per_word)
    name = f"{setting}_transformer4"
    assert m[name]["step"] == int(table["step"].max())
    assert m[name]["G"] == pytest.approx(G, abs=2e-5)
    assert figure(VISUAL, f"{name}.G").read(m) == pytest.approx(G, abs=2e-5)
    assert claim(VISUAL, f"{name}.p_value").read(m) == pytest.approx(p, abs=P_DRAWS)
