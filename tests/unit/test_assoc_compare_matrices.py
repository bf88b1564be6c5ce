"""Departures, the matrices shown next to the probe words, run names and the basis file,
at values written down by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from refusals import refuses
from safetensors.torch import load_file

from emergence.core.models.registry import build_model
from emergence.studies.assoc.compare import departures, learned_matrices, theory_matrices
from emergence.studies.assoc.compare_params import AssocRuns
from emergence.studies.assoc.theory import BASIS_NAMES, Basis, basis_summary, load_basis, save_basis


def t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


# Every matrix different, with negative entries where max |x| differs from max x.
BASIS = Basis(
    B=t([[3, 0], [4, 0]]),
    Phi=t([[0, 1], [2, 0]]),
    Sigma_B=t([[-5, 1], [0, 0]]),
    G=t([[1, 1], [1, 1]]),
    Q=t([[1, 2], [-2, 0]]),
    Delta=t([2, -1, 2]),
)


def test_departures_first_checkpoint_strictly_below_the_bar():
    # (seed, weight, layer) -> cosines at steps 1..4; epoch = step / 4, corpus loss = 10 seed + step
    cos = {
        (0, "W_O", -1): [0.95, 0.8, 0.7, 0.9],  # first below at step 2, not at the minimum (step 3)
        (0, "V", 0): [0.9, 0.9, 0.95, 0.9],  # at the bar, never below it
        (1, "W_O", -1): [0.99, 0.95, 0.92, 0.85],
        (1, "V", 0): [float("nan"), 0.5, 0.4, 0.3],  # undefined at step 1 is not below
    }
    rows = [
        dict(n_layers=1, seed=s, step=step, layer=layer, weight=w, cosine=c, epoch=step / 4, corpus_loss=10 * s + step)
        for (s, w, layer), values in cos.items()
        for step, c in zip(range(1, 5), values)
    ]
    frame = pd.DataFrame(rows[::-1])  # latest first: the first step must come from sorting, not row order
    got = departures(frame, {"W_O": 0.9, "V": 0.9, "W": 0.5, "P": 0.5})
    assert list(got.columns) == [
        "n_layers",
        "seed",
        "layer",
        "weight",
        "bar",
        "first_step_below",
        "epoch",
        "corpus_loss",
    ]
    assert [tuple(r) for r in got[["seed", "layer", "weight"]].itertuples(index=False)] == [
        (0, -1, "W_O"),
        (0, 0, "V"),
        (1, -1, "W_O"),
        (1, 0, "V"),
    ]
    first = got["first_step_below"].tolist()
    assert first[0] == 2 and math.isnan(first[1]) and first[2:] == [4, 2]
    assert got["epoch"].tolist()[2:] == [1.0, 0.5] and got["epoch"][0] == 0.5 and math.isnan(got["epoch"][1])
    assert got["corpus_loss"].tolist()[2:] == [14.0, 12.0] and got["corpus_loss"][0] == 2.0
    assert math.isnan(got["corpus_loss"][1])
    # each weight against its own bar: V's 0.95 is below a bar of 0.96, W_O's 0.95 not below 0.95
    got = departures(frame, {"W_O": 0.95, "V": 0.96, "W": 0.5, "P": 0.5})
    assert got["bar"].tolist() == [0.95, 0.96, 0.95, 0.96]
    assert got["first_step_below"].tolist() == [2, 1, 3, 2]


def test_learned_matrices_are_the_models_w_o_and_every_layers_v():
    model = build_model("attn_only", dict(n_layers=2, d_vocab=3, n_ctx=4, dtype="float64"))
    with torch.no_grad():
        for i, (name, layer) in enumerate([("W_O", None), ("V", 0), ("V", 1), ("W", 0), ("W", 1)]):
            model.weight(name, layer).fill_(i + 1)
    got = learned_matrices(model)
    assert list(got) == ["W_O (learned)", "V0 (learned)", "V1 (learned)"]
    assert [float(m.detach().flatten()[0]) for m in got.values()] == [1.0, 2.0, 3.0]
    assert got["V1 (learned)"] is model.weight("V", 1)


def test_theory_matrices_name_the_basis_and_transpose_b_phi():
    got = theory_matrices(BASIS)
    assert list(got) == ["B", "Phi", "Sigma_B", "(B Phi)^T"]
    assert got["B"] is BASIS.B and got["Phi"] is BASIS.Phi and got["Sigma_B"] is BASIS.Sigma_B
    # B Phi = [[3*0 + 0*2, 3*1 + 0*0], [4*0 + 0*2, 4*1 + 0*0]] = [[0, 3], [0, 4]], transposed:
    assert torch.equal(got["(B Phi)^T"], t([[0, 0], [3, 4]]))


def test_run_names_layers_outer_seeds_inner():
    assert AssocRuns(layers=[3, 1], seeds=[0, 5]).names() == ["L3_seed0", "L3_seed5", "L1_seed0", "L1_seed5"]
    assert AssocRuns(layers=[2], seeds=[7]).names() == ["L2_seed7"]


def test_basis_tensors_are_every_closed_form_in_order():
    got = BASIS.tensors()
    assert list(got) == list(BASIS_NAMES) == ["B", "Phi", "Sigma_B", "G", "Q", "Delta"]
    assert all(got[name] is getattr(BASIS, name) for name in BASIS_NAMES)


def test_basis_summary_shape_and_scale_by_hand():
    got = basis_summary(BASIS).set_index("name")
    assert list(got.index) == list(BASIS_NAMES)
    assert got["shape"].tolist() == ["2x2"] * 5 + ["3"]
    # Frobenius norms: B 5, Phi sqrt(5), Sigma_B sqrt(26), G 2, Q 3, Delta 3
    expected_norm = [5.0, math.sqrt(5), math.sqrt(26), 2.0, 3.0, 3.0]
    assert got["fro_norm"].tolist() == pytest.approx(expected_norm, rel=1e-15)
    assert got["max_abs"].tolist() == [4.0, 2.0, 5.0, 1.0, 2.0, 2.0]
    assert got["mean"].tolist() == [7 / 4, 3 / 4, -4 / 4, 1.0, 1 / 4, 1.0]


def test_save_basis_round_trips_and_replaces_the_file(tmp_path):
    path = tmp_path / "basis.safetensors"
    path.write_bytes(b"stale")
    # a transposed view is not contiguous: safetensors refuses those unless made contiguous first
    basis = Basis(**{**BASIS.tensors(), "Q": BASIS.Q.T})
    save_basis(basis, path)
    stored = load_file(str(path))
    assert sorted(stored) == sorted(BASIS_NAMES)
    assert torch.equal(stored["Q"], t([[1, -2], [2, 0]]))
    loaded = load_basis(path)
    for name in BASIS_NAMES:
        assert torch.equal(getattr(loaded, name), getattr(basis, name)), name
    assert [p.name for p in tmp_path.iterdir()] == ["basis.safetensors"]  # no temporary left behind


def test_a_basis_holding_a_nan_is_refused_naming_the_file_and_the_tensor(tmp_path):
    path = tmp_path / "basis.safetensors"
    phi = BASIS.Phi.clone()
    phi[0, 1] = float("nan")
    save_basis(Basis(**{**BASIS.tensors(), "Phi": phi}), path)
    with refuses(path, "Phi", "non-finite"):
        load_basis(path)
