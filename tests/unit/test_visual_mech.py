"""Visual-dialogue attention analyses on tiny models: matched inputs of both settings, saliency with the
image as the environment, heads and ablation per checkpoint, run selection and the report sections."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import assert_refused, refuses, refuses_key
from tiny_models import no_hooks

from emergence.core.config import from_dict
from emergence.core.models.registry import build_model
from emergence.interp.ablation import ablation_hook
from emergence.interp.saliency import head_saliency
from emergence.studies.grounding import visual_inputs
from emergence.studies.grounding.ablation import ablation_rows, checkpoint_ablations, control_heads
from emergence.studies.grounding.ablation_params import HeadAblationParams
from emergence.studies.grounding.gain import target_surprisal
from emergence.studies.grounding.report_visual import mechanism_sections, visual_curve, visual_metrics
from emergence.studies.grounding.saliency import SALIENCY_COLUMNS, find_heads, rise_over_init, saliency_table
from emergence.studies.grounding.saliency_params import HeadParams
from emergence.studies.grounding.visual_gain import matched_visual_inputs

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = ["<unk>", "<Q>", "<A>", "a<ENV>", "dog<ENV>", "cat<ENV>", "is<LAN>", "dog<LAN>", "cat<LAN>", "yes<LAN>"]
INDEX = {t: i for i, t in enumerate(VOCAB)}
EVAL = pd.DataFrame(
    {
        "word": ["dog", "cat"],
        "context": [["a<ENV>", "dog<ENV>", "<Q>", "is<LAN>"], ["cat<ENV>", "<Q>", "yes<LAN>", "<A>", "is<LAN>"]],
        "image_id": [10, 11],
        "image_context": [["<Q>", "is<LAN>"], ["<Q>", "yes<LAN>", "<A>", "is<LAN>"]],
    }
)
P, D_FEAT, L, H = 3, 5, 2, 3
FEATURES = torch.randn(4, P, D_FEAT, generator=torch.Generator().manual_seed(1))  # (images, P, d)
IMAGE_ROW = {12: 0, 10: 1, 11: 2, 13: 3}


def prefix_model(seed: int = 0, n_ctx: int = 12) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(
        "transformer",
        dict(
            n_layers=L,
            d_model=24,
            n_heads=H,
            d_head=8,
            d_mlp=32,
            n_ctx=n_ctx,
            d_vocab=len(VOCAB),
            d_prefix=D_FEAT,
            pos="learned",
        ),
    ).eval()


def test_caption_setting_reads_the_caption_as_the_text_study_does():
    contexts, targets, env_pos, prefixes = matched_visual_inputs("caption", EVAL, INDEX)
    assert contexts[0] == [3, 4, 1, 6] and targets == [INDEX["dog<LAN>"], INDEX["cat<LAN>"]]
    assert env_pos == [[1], [0]] and prefixes is None


def test_image_setting_reads_the_dialogue_after_its_own_image():
    contexts, targets, env_pos, prefixes = matched_visual_inputs("image", EVAL, INDEX, FEATURES, IMAGE_ROW)
    assert contexts == [[1, 6], [1, 9, 2, 6]] and env_pos == [[], []]  # no caption: only the image is ENV
    assert torch.equal(prefixes, FEATURES[[1, 2]])  # (N, P, d): images 10 and 11
    with refuses("image_id 99"):
        matched_visual_inputs("image", EVAL.assign(image_id=[10, 99]), INDEX, FEATURES, IMAGE_ROW)


def test_image_saliency_counts_the_prefix_positions_as_the_environment():
    model = prefix_model()
    contexts, targets, env_pos, prefixes = matched_visual_inputs("image", EVAL, INDEX, FEATURES, IMAGE_ROW)
    table = saliency_table([(0, model), (7, prefix_model(1))], contexts, targets, env_pos, 1, prefixes)
    assert list(table.columns) == list(SALIENCY_COLUMNS) and sorted(set(table["step"])) == [0, 7]
    assert len(table) == 2 * (2 * L * H + 2 * L) and table["value"].between(0, 1).all()
    expected = 0.0  # the definition, one unpadded context at a time
    for b, (c, t) in enumerate(zip(contexts, targets)):
        p = P + len(c) - 1
        S = head_saliency(model, torch.tensor([c]), torch.tensor([p]), torch.tensor([t]), prefix=prefixes[b : b + 1])[
            :, 0
        ].abs()  # (L, H, P + T, P + T)
        expected += (S[1, 2, p, :P].sum() / S[1, 2].sum()).item() / len(contexts)
    got = table.query("step == 0 and metric == 'aggregate_share' and layer == 1 and head == 2")["value"].item()
    assert got == pytest.approx(expected, rel=1e-4)
    assert no_hooks(model)


def test_untrained_models_have_no_image_heads_above_their_step0_share():
    """16 image positions (pool_grid 4) take most of an untrained head's saliency: by the share alone nearly
    every head is an aggregate head at every checkpoint; measured against step 0 (another random init
    standing in for each later checkpoint) (almost) none is."""
    g = torch.Generator().manual_seed(5)
    n, n_prefix = 8, 16
    feats = 3.0 + torch.randn(n, n_prefix, D_FEAT, generator=g)
    contexts = [torch.randint(1, len(VOCAB), (8,), generator=g).tolist() for _ in range(n)]
    targets = [INDEX["dog<LAN>"]] * n
    models = [(10 * k, prefix_model(k, n_ctx=n_prefix + 8)) for k in range(4)]
    table = saliency_table(models, contexts, targets, [[]] * n, n, feats)
    plain = find_heads(table, 0.3).query("kind == 'aggregate'").groupby("step").size()
    assert len(plain) == 4 and plain.min() >= L * H // 2
    assert len(find_heads(table, 0.3, "init").query("kind == 'aggregate'")) <= 1
    assert find_heads(table.query("step == 0"), 0.3, "init").empty


def test_rise_over_init_and_the_visual_head_params():
    table = pd.DataFrame(
        {
            "seed": [0, 0, 0, 1, 1],
            "step": [0, 5, 9, 0, 5],
            "layer": 0,
            "head": 1,
            "metric": "aggregate_share",
            "value": [0.5, 0.65, 0.9, 0.0, 0.3],
        }
    )
    np.testing.assert_allclose(rise_over_init(table), [0.0, 0.3, 0.8, 0.0, 0.3])
    found = find_heads(table, 0.3, "init")
    assert found[["seed", "step"]].values.tolist() == [[0, 5], [0, 9], [1, 5]]
    assert found["share"].tolist() == [0.65, 0.9, 0.3]  # the share itself is reported
    with refuses("saliency", "step-0"):
        find_heads(table.query("step > 0"), 0.3, "init")
    p = from_dict(HeadParams, {"threshold": 0.3}, "visual_heads")
    assert p.baseline("image") == "init" and p.baseline("caption") == "none"
    with refuses_key("visual_heads.image_baseline", "first"):
        from_dict(HeadParams, {"image_baseline": "first"}, "visual_heads")
    with refuses_key("visual_heads.image_baselines", rule="unknown key"):
        from_dict(HeadParams, {"image_baselines": "init"}, "visual_heads")


def test_checkpoint_ablations_zero_each_kind_with_the_image_read_first():
    models = [(0, prefix_model()), (5, prefix_model(1))]
    contexts, targets, _, prefixes = matched_visual_inputs("image", EVAL, INDEX, FEATURES, IMAGE_ROW)
    heads = pd.DataFrame(
        {
            "step": [5, 5, 0],
            "layer": [0, 1, 1],
            "head": [1, 2, 0],
            "kind": ["aggregate", "aggregate", "gather"],
            "share": 0.5,
        }
    )
    out = checkpoint_ablations(models, heads, contexts, targets, HeadAblationParams(n_draws=2, seed=3), prefixes)
    assert out.groupby(["step", "kind"])["n_heads"].first().to_dict() == {
        (0, "aggregate"): 0,
        (0, "gather"): 1,
        (5, "aggregate"): 2,
        (5, "gather"): 0,
    }
    model = models[1][1]
    with model.hooks([ablation_hook(0, [1], "zero", None), ablation_hook(1, [2], "zero", None)]):
        by_hand = target_surprisal(model, contexts, targets, prefixes=prefixes)
    row = out[(out["step"] == 5) & (out["kind"] == "aggregate")]
    np.testing.assert_allclose(row["intervention"], by_hand, rtol=1e-6)
    np.testing.assert_allclose(
        row["original"], target_surprisal(model, contexts, targets, prefixes=prefixes), rtol=1e-6
    )
    assert out.loc[out["n_heads"] == 0, "intervention"].isna().all() and no_hooks(model)
    # control draws are seeded by seed + step: step 5 draws as ablation_rows does with seed 3 + 5
    # (8 draws: about 1 in 13 seeds draws the same controls)
    out = checkpoint_ablations(models, heads, contexts, targets, HeadAblationParams(n_draws=8, seed=3), prefixes)
    row = out[(out["step"] == 5) & (out["kind"] == "aggregate")]
    alone = ablation_rows(model, contexts, targets, [(0, 1), (1, 2)], 8, 8, prefixes)
    np.testing.assert_allclose(row["control"], alone["control"], rtol=1e-6)
    other = ablation_rows(model, contexts, targets, [(0, 1), (1, 2)], 8, 3, prefixes)  # seed alone, step left out
    assert not np.allclose(alone["control"], other["control"])


def test_ablation_controls_read_the_image_too():
    """Each control draw is measured with the image prefix, as the original and the intervention are."""
    model = prefix_model(1)
    contexts, targets, _, prefixes = matched_visual_inputs("image", EVAL, INDEX, FEATURES, IMAGE_ROW)
    heads = [(0, 1), (1, 2)]
    rows = ablation_rows(model, contexts, targets, heads, n_draws=3, seed=2, prefixes=prefixes)
    rng, per_draw, blind = np.random.default_rng(2), [], []
    for _ in range(3):  # the seeded draws, each ablated alone, with and without the image
        drawn = control_heads(heads, H, rng)
        by_layer = {layer: [h for l2, h in drawn if l2 == layer] for layer, _ in drawn}
        with model.hooks([ablation_hook(layer, hs, "zero", None) for layer, hs in by_layer.items()]):
            per_draw.append(target_surprisal(model, contexts, targets, prefixes=prefixes))
            blind.append(target_surprisal(model, contexts, targets))
    np.testing.assert_allclose(rows["control"], np.mean(per_draw, axis=0), rtol=1e-6)
    assert not np.allclose(np.mean(per_draw, axis=0), np.mean(blind, axis=0), rtol=1e-3)  # the image matters


def params(run_models: list[str], attention: list[str]) -> dict:
    return {
        "visual_runs": {"settings": ["caption", "image"], "models": run_models, "seeds": [0, 1]},
        "visual_saliency": {"models": attention},
        "grounding_models": {"transformer4": {"arch": "transformer"}, "lstm4": {"arch": "lstm"}},
    }


def test_attention_runs_are_transformers_of_the_visual_runs():
    runs = visual_inputs.runs_of(params(["transformer4", "lstm4"], ["transformer4"]))
    assert runs.names(["transformer4"]) == [
        "caption_transformer4_seed0",
        "caption_transformer4_seed1",
        "image_transformer4_seed0",
        "image_transformer4_seed1",
    ]
    ok = params(["transformer4", "lstm4"], ["transformer4"])
    assert visual_inputs.attention_models(ok).models == ["transformer4"]
    with refuses("visual_saliency.models", "'lstm4'", "attention") as err:  # an lstm has no heads
        visual_inputs.attention_models(params(["transformer4", "lstm4"], ["lstm4"]))
    assert_refused([str(err.value)], "visual_saliency.models")
    with refuses("visual_saliency.models", "'transformer4'", "visual_runs.models") as err:
        visual_inputs.attention_models(params(["lstm4"], ["transformer4"]))
    assert_refused([str(err.value)], "visual_saliency.models")
    bad = params(["transformer4"], ["transformer4"])
    with refuses_key("visual_runs.model", rule="unknown key"):
        visual_inputs.runs_of({**bad, "visual_runs": {**bad["visual_runs"], "model": []}})
    with refuses_key("visual_saliency.model", rule="unknown key"):
        visual_inputs.attention_models({**bad, "visual_saliency": {"model": []}})


def run_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """gain, saliency, heads and ablation rows of a caption and an image run, two checkpoints."""
    grid = pd.DataFrame(
        [(s, "t4", 0, step) for s in ("caption", "image") for step in (0, 9)],
        columns=["setting", "model", "seed", "step"],
    )
    gain = grid.merge(
        pd.DataFrame({"word": ["dog", "cat"], "s_matched": [2.0, 2.5], "s_mismatched": [3.0, 2.6], "gain": [1.0, 0.1]}),
        how="cross",
    )
    cells = pd.DataFrame(
        [(layer, head, m) for layer in range(L) for head in range(H) for m in ("aggregate_share", "gather_share")]
        + [(layer, -1, m) for layer in range(L) for m in ("env_to_pred", "other_to_pred")],
        columns=["layer", "head", "metric"],
    )
    saliency = grid.merge(cells, how="cross")
    saliency["value"] = np.where((saliency["setting"] == "image") & (saliency["layer"] == 0), 0.6, 0.1)
    heads = find_heads(saliency, 0.3)
    n = 4
    ablation = grid.merge(pd.DataFrame({"kind": ["aggregate", "gather"]}), how="cross").merge(
        pd.DataFrame({"context": range(n)}), how="cross"
    )
    image_agg = (ablation["setting"] == "image") & (ablation["kind"] == "aggregate")
    ablation = ablation.assign(
        original=2.0,
        intervention=np.where(image_agg, 3.0 + 0.1 * ablation["context"], np.nan),
        control=np.where(image_agg, 2.0, np.nan),
        n_heads=np.where(image_agg, H, 0),
        n_control_heads=0,
    )
    return gain, saliency, heads, ablation


def test_report_sections_label_each_setting_and_show_what_the_control_lacks():
    gain, saliency, heads, ablation = run_tables()
    sections = dict(mechanism_sections(saliency, heads, ablation, 0.3, "init"))
    assert list(sections) == ["Saliency flow by layer", "Aggregate and gather heads", "Head ablation"]
    assert "(s − s0) / (1 − s0) ≥ 30%" in sections["Aggregate and gather heads"]
    plain = dict(mechanism_sections(saliency, heads, ablation, 0.3, "none"))["Aggregate and gather heads"]
    assert "image_baseline: none" in plain and "s0" not in plain
    assert "image / t4" in sections["Aggregate and gather heads"] and "caption / t4" in sections["Head ablation"]
    assert "ENV → prediction" in sections["Saliency flow by layer"]
    assert "control heads (mean)" in sections["Head ablation"]
    assert "Paper (Wu et al., Table 2)" not in sections["Head ablation"]
    metrics = visual_metrics(visual_curve(gain), ablation)
    assert metrics["image_t4"]["step"] == 9 and metrics["caption_t4"]["G"] == pytest.approx(0.55)
    agg = metrics["ablation"]["image_t4_aggregate"]
    assert agg["heads (mean)"] == H and agg["intervention"] > agg["control"] and agg["p (intervention > control)"] < 0.1
    assert metrics["ablation"]["caption_t4_gather"]["intervention"] is None


def test_an_empty_image_setting_gives_an_empty_prefix_batch():
    contexts, targets, env_pos, prefixes = matched_visual_inputs("image", EVAL.iloc[:0], INDEX, FEATURES, IMAGE_ROW)
    assert contexts == [] and targets == [] and env_pos == []
    assert prefixes.shape == (0, P, D_FEAT) and prefixes.dtype == FEATURES.dtype
