"""Oracles for the association study's headline numbers, recomputed from the finished tiny run's raw
artifacts: the corpus's token sequences and the saved weights (safetensors files read with numpy).

The second way: the closed forms are built here with dense one-hot matrices straight from the
definitions in docs/associations.md and theory.py's notes (no scatter-adds, no streaming), the cosines
taken with numpy, and the model's loss computed by a numpy forward pass of the attention-only model
as docs/associations.md writes it: h += softmax(mask(h W h^T + DM(P))) h V, logits h W_O."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from safetensors.numpy import load_file

from emergence.claims import ASSOC, FIGURES

pytestmark = pytest.mark.pipeline


# ---- helpers ----------------------------------------------------------------------------------


def params(run: Path) -> dict:
    return yaml.safe_load((run / "params.yaml").read_text())


def path(run: Path, key: str) -> Path:
    return run / params(run)["paths"][key]


def metrics(run: Path) -> dict:
    return json.loads(path(run, "assoc_metrics").read_text())


def figure(label_start: str):
    (fig,) = [f for f in FIGURES if f.study == ASSOC and f.label.startswith(label_start)]
    return fig


def checkpoints(run_dir: Path) -> dict[int, Path]:
    found = {int(m.group(1)): p for p in run_dir.iterdir() if (m := re.fullmatch(r"step(\d+)", p.name))}
    assert found, f"no checkpoints in {run_dir}"
    return dict(sorted(found.items()))


def runs(run: Path) -> dict[str, Path]:
    """`L{layers}_seed{S}` -> run directory."""
    return {p.name: p for p in sorted(path(run, "assoc_runs").iterdir()) if re.fullmatch(r"L\d+_seed\d+", p.name)}


def sequences(run: Path) -> np.ndarray:
    return load_file(str(path(run, "assoc_corpus")))["sequences"].astype(np.int64)


def causal_attention(T: int) -> np.ndarray:
    """Uniform causal attention: row t spreads 1 / (t + 1) over positions 0..t."""
    return np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]


def closed_forms(seqs: np.ndarray, V: int) -> dict[str, np.ndarray]:
    """B, Phi, Q, Delta from their definitions, one sequence at a time, with dense one-hot matrices."""
    N, T = seqs.shape[0], seqs.shape[1] - 1
    eye, A0 = np.eye(V), causal_attention(T)
    B, Phi = np.zeros((V, V)), np.zeros((V, V))
    for s in seqs:
        X, R = eye[s[:-1]], eye[s[1:]] - 1.0 / V
        B += X.T @ R
        Phi += R.T @ A0 @ X
    B, Phi = B / (N * T), Phi / (N * T)
    G = (B @ Phi).T @ B
    Q, Delta = np.zeros((V, V)), np.zeros(T)
    for s in seqs:
        X, R = eye[s[:-1]], eye[s[1:]] - 1.0 / V
        C = R @ G.T @ X.T
        D = A0 * (C - (A0 * C).sum(axis=1, keepdims=True))
        Q += X.T @ D @ X
        for k in range(T):
            Delta[k] += np.trace(D, offset=-k)
    return {"B": B, "Phi": Phi, "Q": Q / (N * T), "Delta": Delta / (N * T)}


def theory(basis: dict, weight: str) -> np.ndarray:
    """The closed form each learned weight is compared with (docs/associations.md)."""
    return {"W_O": basis["B"], "V": (basis["B"] @ basis["Phi"]).T, "W": basis["Q"], "P": basis["Delta"]}[weight]


def cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


def learned(weights: dict, key: str) -> tuple[str, np.ndarray]:
    """metrics key (W0, V1, P0, W_O) -> (weight name, tensor)."""
    if key == "W_O":
        return "W_O", weights["W_O"]
    name, layer = key[0], key[1:]
    return name, weights[f"blocks.{layer}.attn.{name}"]


def weight_keys(weights: dict) -> list[str]:
    layers = sorted({int(k.split(".")[1]) for k in weights if k.startswith("blocks.")})
    return [f"{w}{layer}" for layer in layers for w in ("W", "V", "P")] + ["W_O"]


def corpus_loss(weights: dict, seqs: np.ndarray) -> float:
    """Mean next-token cross-entropy over every position of every sequence."""
    x, y = seqs[:, :-1], seqs[:, 1:]
    n, T = x.shape
    V = weights["W_O"].shape[0]
    h = np.eye(V)[x]  # (n, T, V)
    offset = np.arange(T)[:, None] - np.arange(T)[None, :]
    layers = sorted({int(k.split(".")[1]) for k in weights if k.startswith("blocks.")})
    for layer in layers:
        W, Vw, P = (weights[f"blocks.{layer}.attn.{k}"].astype(np.float64) for k in ("W", "V", "P"))
        scores = h @ W @ h.transpose(0, 2, 1) + np.where(offset >= 0, P[np.clip(offset, 0, None)], -np.inf)
        scores = scores - scores.max(axis=-1, keepdims=True)
        attn = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
        h = h + attn @ h @ Vw
    logits = h @ weights["W_O"].astype(np.float64)
    logits = logits - logits.max(axis=-1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    return float(-np.take_along_axis(log_p, y[..., None], axis=-1).mean())


@pytest.fixture(scope="module")
def basis(tiny_run) -> dict[str, np.ndarray]:
    V = json.loads((next(iter(checkpoints(next(iter(runs(tiny_run).values()))).values())) / "config.json").read_text())
    return closed_forms(sequences(tiny_run), V["config"]["d_vocab"])


# ---- the closed forms ---------------------------------------------------------------------------


def test_the_saved_basis_is_the_corpus_closed_forms(tiny_run, basis):
    """The default compares with the closed forms of every training sequence (assoc_compare.basis: corpus)."""
    assert metrics(tiny_run)["basis"] == "corpus"
    saved = load_file(str(path(tiny_run, "assoc_basis")))
    for name, mine in basis.items():
        assert np.allclose(saved[name], mine, rtol=1e-9, atol=1e-15 * np.abs(mine).max()), name


# ---- minimum cosines ------------------------------------------------------------------------------


def window_minima(run: Path, run_dir: Path, basis: dict) -> tuple[dict[str, float], dict[str, float]]:
    """Per weight key: the minimum cosine over the checkpoints at epoch ends inside the first
    assoc_compare.window_epochs epochs where the weight is no longer zero; and over every non-zero
    checkpoint (to show the window matters)."""
    n = len(sequences(run))
    window_epochs = params(run)["assoc_compare"]["window_epochs"]
    inside, every = {}, {}
    for step, step_dir in checkpoints(run_dir).items():
        weights = load_file(str(step_dir / "model.safetensors"))
        batch = json.loads((step_dir / "config.json").read_text())["meta"]["train"]["batch_size"] or n
        per_epoch = -(-n // batch)
        for key in weight_keys(weights):
            name, w = learned(weights, key)
            if not np.any(w):
                continue
            c = cos(w, theory(basis, name))
            every[key] = min(every.get(key, 2.0), c)
            if step % per_epoch == 0 and step <= window_epochs * per_epoch:
                inside[key] = min(inside.get(key, 2.0), c)
    return inside, every


def test_min_cosine_per_weight_and_run_over_the_window(tiny_run, basis):
    got = metrics(tiny_run)["min_cosine"]
    assert set(got) == set(runs(tiny_run))
    window_mattered = False
    for name, run_dir in runs(tiny_run).items():
        inside, every = window_minima(tiny_run, run_dir, basis)
        assert got[name] == pytest.approx(inside, abs=1.5e-6)
        window_mattered |= any(abs(every[k] - inside[k]) > 1.5e-6 for k in inside)
    assert window_mattered, "no checkpoint outside the window differs: the test could not tell the window"


@pytest.mark.parametrize("weight", ["W", "V", "W_O", "P"])
def test_headline_min_cosine_is_the_deepest_runs_minimum_over_layers(tiny_run, basis, weight):
    by_run = {name: window_minima(tiny_run, d, basis)[0] for name, d in runs(tiny_run).items()}
    layers = {name: int(re.match(r"L(\d+)", name).group(1)) for name in by_run}
    deepest = [name for name in by_run if layers[name] == max(layers.values())]
    assert max(layers.values()) >= 2  # a run with several layers: the minimum is over them
    expected = min(v for name in deepest for k, v in by_run[name].items() if re.fullmatch(rf"{weight}\d*", k))
    assert figure(f"min cosine of {weight},").read(metrics(tiny_run)) == pytest.approx(expected, abs=1.5e-6)


# ---- causal check -------------------------------------------------------------------------------


def removal_losses(run: Path, step_dir: Path, basis: dict) -> dict[str, float]:
    """Loss with nothing removed ("none") and with each weight's projection on its closed form removed."""
    weights, seqs = load_file(str(step_dir / "model.safetensors")), sequences(run)
    n = params(run)["assoc_causal"]["n_sequences"]
    seqs = seqs[:n] if n else seqs
    out = {"none": corpus_loss(weights, seqs)}
    for key in weight_keys(weights):
        name, w = learned(weights, key)
        t = theory(basis, name)
        w64 = w.astype(np.float64)
        removed = w64 - (w64 * t).sum() / (t * t).sum() * t
        edited = dict(weights)
        edited["W_O" if key == "W_O" else f"blocks.{key[1:]}.attn.{name}"] = removed
        out[key] = corpus_loss(edited, seqs)
    return out


def test_causal_losses_and_output_margin_at_the_final_checkpoint(tiny_run, basis):
    m = metrics(tiny_run)
    assert params(tiny_run)["assoc_causal"]["checkpoint"] == "final"
    margins = {}
    for name, run_dir in runs(tiny_run).items():
        ckpts = checkpoints(run_dir)
        final = removal_losses(tiny_run, ckpts[max(ckpts)], basis)
        for key, loss in final.items():
            assert m["causal_loss"][f"{name}/{key}"] == pytest.approx(loss, abs=1.5e-4), (name, key)
        earlier = removal_losses(tiny_run, ckpts[sorted(ckpts)[-2]], basis)
        assert abs(earlier["none"] - final["none"]) > 1e-3  # another checkpoint would show
        margins[name] = final["W_O"] - max(v for k, v in final.items() if k not in ("W_O", "none"))
    layers = {name: int(re.match(r"L(\d+)", name).group(1)) for name in margins}
    expected = min(v for name, v in margins.items() if layers[name] == max(layers.values()))
    assert figure("loss rise when W_O").read(m) == pytest.approx(expected, abs=3e-4)
