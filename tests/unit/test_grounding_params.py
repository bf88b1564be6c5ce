"""The small params sections of the grounding and visual studies, read as from params.yaml (from_dict):
each bound itself passes, one past it is refused with the key and the value in one line."""

from __future__ import annotations

import pytest
from refusals import assert_refused, refuses

from emergence.core.config import from_dict
from emergence.core.io import PipelineError
from emergence.studies.grounding.ablation_params import HeadAblationParams
from emergence.studies.grounding.cooc import CoocParams
from emergence.studies.grounding.inputs_params import SaliencyParams
from emergence.studies.grounding.marking_params import MarkingParams
from emergence.studies.grounding.visual_params import VisualRuns


def refused(cls, values: dict, where: str, key: str, value, rule: str) -> None:
    """One line naming `where.key` first, the offending `value` and the `rule` it breaks."""
    with refuses(f"{where}.{key}: ") as e:
        from_dict(cls, values, where)
    assert_refused([str(e.value)], f"{where}.{key}", value, rule)


# --- one integer with a lower bound: n_draws >= 1 (a control needs a draw), batch_size >= 1, seed >= 0 ---


@pytest.mark.parametrize(
    "cls, where, base, key, low",
    [
        (HeadAblationParams, "grounding_ablation", {}, "n_draws", 1),
        (SaliencyParams, "grounding_saliency", {"models": ["t4"]}, "batch_size", 1),
        (MarkingParams, "grounding_marking", {}, "seed", 0),
    ],
)
def test_each_bound_passes_and_one_below_is_refused(cls, where, base, key, low):
    assert getattr(from_dict(cls, {**base, key: low}, where), key) == low
    with pytest.raises(PipelineError) as e:
        from_dict(cls, {**base, key: low - 1}, where)
    (line,) = str(e.value).splitlines()
    assert_refused([line], f"{where}.{key}", low - 1)
    refused(cls, {**base, key: True}, where, key, True, "integer")  # a bool is no count


# --- co-occurrence features: a non-empty subset of the known ones ---


@pytest.mark.parametrize("features", [["pmi"], ["log_lan", "log_cooc"], ["log_cooc", "pmi", "p_lan_given_env"]])
def test_cooc_features_may_be_any_non_empty_subset(features):
    assert from_dict(CoocParams, {"features": features}, "grounding_cooc").features == features


@pytest.mark.parametrize("features", [[], ["pmi", "tfidf"], ["PMI"]])
def test_cooc_features_refuse_none_or_an_unknown_one(features):
    known = "['log_cooc', 'pmi', 'p_lan_given_env', 'log_env', 'log_lan']"  # cooc.FEATURES, in its order
    refused(CoocParams, {"features": features}, "grounding_cooc", "features", features, known)


# --- visual runs: settings from caption / image, models and seeds distinct and non-empty ---

RUNS = {"settings": ["caption", "image"], "models": ["t4", "l4"], "seeds": [0, 1]}


@pytest.mark.parametrize("settings", [["caption"], ["image"], ["image", "caption"]])
def test_visual_runs_take_one_or_both_settings(settings):
    runs = from_dict(VisualRuns, {**RUNS, "settings": settings}, "visual_runs")
    assert runs.names(["t4"]) == [f"{s}_t4_seed{k}" for s in settings for k in (0, 1)]


@pytest.mark.parametrize(
    "key, value",
    [
        ("settings", []),
        ("settings", ["caption", "audio"]),  # unknown, though distinct
        ("settings", ["image", "image"]),  # known, but twice
        ("models", []),
        ("models", ["t4", "t4"]),
        ("seeds", []),
        ("seeds", [3, 3]),
    ],
)
def test_visual_runs_refuse_empty_unknown_or_repeated_values(key, value):
    rule = {"settings": "['caption', 'image']", "models": "distinct", "seeds": "distinct"}[key]
    refused(VisualRuns, {**RUNS, key: value}, "visual_runs", key, value, rule)
