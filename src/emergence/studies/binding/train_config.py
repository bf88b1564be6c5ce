"""binding_model and binding_train params -> (arch, model config) and TrainConfig."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge

from emergence.core.config import from_dict, section
from emergence.core.io import PipelineError
from emergence.core.train import TrainConfig
from emergence.studies.binding.batches import Format
from emergence.studies.binding.programs import Distractor, HopWeightPower, Links, ProgramConfig


def model_params(params: dict, n_tokens: int, d_vocab: int) -> tuple[str, dict]:
    """(arch, config dict) from binding_model, with the vocabulary filled in and the context checked."""
    values = dict(section(params, "binding_model"))
    arch = values.pop("arch", "transformer")
    if "d_vocab" in values:
        raise PipelineError("binding_model.d_vocab: set by the tokenizer, remove it from params")
    if values.get("n_ctx", 0) < n_tokens:
        raise PipelineError(f"binding_model.n_ctx: programs need {n_tokens} positions, got {values.get('n_ctx')}")
    return arch, {**values, "d_vocab": d_vocab}


@dataclass(frozen=True)
class Stream:
    """binding_train.stream / stream_hop_weight_power / stream_distractor / stream_links: draw fresh
    programs every step, optionally with the hop classes weighted otherwise than the evaluation sets,
    with a planted distractor chain, or with chain layouts mixed (paper generator); None: as
    binding_programs."""

    on: bool = False
    hop_weight_power: float | None = None
    distractor: Distractor | None = None
    links: Links | None = None


def stream_programs(program_cfg: ProgramConfig, stream: Stream) -> ProgramConfig:
    """The distribution the training stream draws from: binding_programs, with the stream's overrides."""
    changes: dict = {}
    if stream.hop_weight_power is not None:
        changes["hop_weight_power"] = float(stream.hop_weight_power)
    if stream.distractor is not None:
        changes["distractor"] = stream.distractor
    if stream.links is not None:
        changes["links"] = stream.links
    return dataclasses.replace(program_cfg, **changes)


@dataclass(frozen=True)
class BindingTrainKeys:
    """binding_train's keys beside TrainConfig's: the training format, the number of validation programs
    and the stream (Stream)."""

    format: Format = "answer_only"
    eval_programs: Annotated[int, Ge(1)] = 500
    stream: bool = False
    stream_hop_weight_power: HopWeightPower | None = None
    stream_distractor: Distractor | None = None
    stream_links: Links | None = None


def train_params(params: dict, seed: int, device: str) -> tuple[str, int, Stream, TrainConfig]:
    """(format, number of validation programs, stream, TrainConfig) from binding_train."""
    values = dict(section(params, "binding_train"))
    own = {f.name: values.pop(f.name) for f in dataclasses.fields(BindingTrainKeys) if f.name in values}
    problems = [] if "seed" not in values else ["binding_train.seed: seeds come from base.seeds, remove it here"]
    values.pop("seed", None)
    try:  # both schemas' problems at once, not the second's only after the first's are fixed
        keys = from_dict(BindingTrainKeys, own, "binding_train")
    except PipelineError as e:
        problems.append(str(e))
    try:
        cfg = from_dict(TrainConfig, {**values, "seed": seed, "device": device}, "binding_train")
    except PipelineError as e:
        problems.append(str(e))
    if problems:
        raise PipelineError("\n".join(problems))
    stream = Stream(keys.stream, keys.stream_hop_weight_power, keys.stream_distractor, keys.stream_links)
    return keys.format, keys.eval_programs, stream, cfg
