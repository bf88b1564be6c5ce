"""Every params.yaml section and the typed schema that checks it, in one place.

`python -m emergence check` runs each checker below on the whole params.yaml
before anything trains. The schemas are the dataclasses the stages themselves
load (`from_dict(Schema, section(params, name), name)`), so the check and the
stage cannot disagree; they live beside the code that uses them, and stages
import them from there, not from this module: importing this registry would
put every study's modules in every stage's dependencies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emergence.core.config import BaseParams, from_dict, section
from emergence.core.io import PipelineError
from emergence.core.models import make_config
from emergence.core.train import TrainConfig
from emergence.interp.tuned_lens import LensParams
from emergence.studies.assoc.compare import (
    AssocRuns,
    AssocTrainParams,
    CausalParams,
    CompareParams,
    OrderParams,
    WordsParams,
)
from emergence.studies.assoc.corpus import CorpusConfig, CorpusParams
from emergence.studies.assoc.stories import StoryConfig
from emergence.studies.binding.ablation import BindingAblationParams
from emergence.studies.binding.patching import PatchingParams
from emergence.studies.binding.programs import load_data_params
from emergence.studies.binding.report import ReportParams
from emergence.studies.binding.train_config import model_params, train_params
from emergence.studies.binding.trajectory import PhaseParams
from emergence.studies.grounding.ablation import HeadAblationParams
from emergence.studies.grounding.childes import ExtractParams
from emergence.studies.grounding.childes_synth import SynthConfig
from emergence.studies.grounding.cooc import CoocParams
from emergence.studies.grounding.dino_features import EncoderParams
from emergence.studies.grounding.inputs import SaliencyParams
from emergence.studies.grounding.saliency import HeadParams
from emergence.studies.grounding.scenes import SceneParams
from emergence.studies.grounding.tokens import EvalParams, GroundingRuns, VocabParams, model_entry
from emergence.studies.grounding.visual_inputs import VisualRuns

Checker = Callable[[dict[str, Any]], Any]


def schema(cls: type, name: str) -> Checker:
    return lambda params: from_dict(cls, section(params, name), name)


def check_paths(params: dict) -> None:
    bad = [
        f"paths.{key}: must be a string, got {value!r}"
        for key, value in section(params, "paths").items()
        if not isinstance(value, str) or not value
    ]
    if bad:
        raise PipelineError("\n".join(bad))


def check_assoc_corpus(params: dict) -> None:
    p = from_dict(CorpusParams, section(params, "assoc_corpus"), "assoc_corpus")
    from_dict(CorpusConfig, {k: v for k, v in vars(p).items() if k != "format"}, "assoc_corpus")


def train_section(name: str) -> Checker:
    """A study's training section: TrainConfig (seed and device come from elsewhere) plus seq_len."""

    def check(params: dict) -> None:
        values = dict(section(params, name))
        seq_len = values.pop("seq_len", 2)
        problems = []
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 2:
            problems.append(f"{name}.seq_len: an integer >= 2, got {seq_len!r}")
        for key in ("seed", "device"):
            if key in values:
                problems.append(
                    f"{name}.{key}: set by base.{key}s" if key == "seed" else f"{name}.device: set by base.device"
                )
        try:
            from_dict(TrainConfig, {**values, "seed": 0, "device": "cpu"}, name)
        except PipelineError as e:
            problems.append(str(e))
        if problems:
            raise PipelineError("\n".join(problems))

    return check


def check_grounding_models(params: dict) -> None:
    """Each entry: a known architecture and its config, d_vocab and n_ctx left to the pipeline."""
    problems = []
    for name in section(params, "grounding_models"):
        where = f"grounding_models.{name}"
        try:
            arch, values = model_entry(section(params, "grounding_models"), name)
            for key in ("d_vocab", "n_ctx"):
                if key in values:
                    raise PipelineError(f"{where}.{key}: set from the vocabulary and seq_len, remove it")
            make_config(arch, {**values, "d_vocab": 2, "n_ctx": 2}, where)
        except (PipelineError, TypeError) as e:
            problems.append(str(e) if isinstance(e, PipelineError) else f"{where}: {e}")
    if problems:
        raise PipelineError("\n".join(problems))


def check_binding_model(params: dict) -> None:
    arch, values = model_params(params, n_tokens=0, d_vocab=2)
    try:
        make_config(arch, values, "binding_model")
    except TypeError as e:
        raise PipelineError(f"binding_model: {e}") from e


def check_grounding_lens(params: dict) -> None:
    values = dict(section(params, "grounding_lens"))
    n_checkpoints = values.pop("n_checkpoints", 4)
    problems = []
    if isinstance(n_checkpoints, bool) or not isinstance(n_checkpoints, int) or n_checkpoints < 1:
        problems.append(f"grounding_lens.n_checkpoints: an integer >= 1, got {n_checkpoints!r}")
    try:
        from_dict(LensParams, values, "grounding_lens")
    except PipelineError as e:
        problems.append(str(e))
    if problems:
        raise PipelineError("\n".join(problems))


SECTIONS: dict[str, Checker] = {
    "base": schema(BaseParams, "base"),
    "paths": check_paths,
    # study B: variable binding
    "binding_data": load_data_params,
    "binding_model": check_binding_model,
    "binding_train": lambda params: train_params(params, seed=0, device="cpu"),
    "binding_trajectory": schema(PhaseParams, "binding_trajectory"),
    "binding_patching": schema(PatchingParams, "binding_patching"),
    "binding_ablation": schema(BindingAblationParams, "binding_ablation"),
    "report": schema(ReportParams, "report"),
    # study A: token associations
    "assoc_stories": schema(StoryConfig, "assoc_stories"),
    "assoc_corpus": check_assoc_corpus,
    "assoc_runs": schema(AssocRuns, "assoc_runs"),
    "assoc_train": schema(AssocTrainParams, "assoc_train"),
    "assoc_compare": schema(CompareParams, "assoc_compare"),
    "assoc_order": schema(OrderParams, "assoc_order"),
    "assoc_causal": schema(CausalParams, "assoc_causal"),
    "assoc_words": schema(WordsParams, "assoc_words"),
    # study G: symbol grounding (CHILDES, then the visual-dialogue settings)
    "childes_synth": schema(SynthConfig, "childes_synth"),
    "childes_extract": schema(ExtractParams, "childes_extract"),
    "grounding_vocab": schema(VocabParams, "grounding_vocab"),
    "grounding_eval": schema(EvalParams, "grounding_eval"),
    "grounding_runs": schema(GroundingRuns, "grounding_runs"),
    "grounding_models": check_grounding_models,
    "grounding_train": train_section("grounding_train"),
    "grounding_cooc": schema(CoocParams, "grounding_cooc"),
    "grounding_lens": check_grounding_lens,
    "grounding_saliency": schema(SaliencyParams, "grounding_saliency"),
    "grounding_heads": schema(HeadParams, "grounding_heads"),
    "grounding_ablation": schema(HeadAblationParams, "grounding_ablation"),
    "visual_scenes": schema(SceneParams, "visual_scenes"),
    "dino_features": schema(EncoderParams, "dino_features"),
    "visual_vocab": schema(VocabParams, "visual_vocab"),
    "visual_eval": schema(EvalParams, "visual_eval"),
    "visual_runs": schema(VisualRuns, "visual_runs"),
    "visual_train": train_section("visual_train"),
    "visual_saliency": schema(SaliencyParams, "visual_saliency"),
    "visual_heads": schema(HeadParams, "visual_heads"),
    "visual_ablation": schema(HeadAblationParams, "visual_ablation"),
}
