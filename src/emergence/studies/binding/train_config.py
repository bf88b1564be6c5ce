"""binding_model and binding_train params -> (arch, model config) and TrainConfig."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from annotated_types import Ge

from emergence.core.config import load_beside, section
from emergence.core.io import PipelineError
from emergence.core.train.config import TrainConfig
from emergence.studies.binding.programs import Distractor, HopWeightPower, Links, ProgramConfig

# what a program's loss is on: its answer only, or every line's value too
Format = Literal["answer_only", "line_values"]
FORMATS = get_args(Format)


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
    fixed = {"seed": ("base.seeds", seed), "device": ("base.device", device)}
    cfg, keys = load_beside(section(params, "binding_train"), "binding_train", TrainConfig, BindingTrainKeys, fixed)
    stream = Stream(keys.stream, keys.stream_hop_weight_power, keys.stream_distractor, keys.stream_links)
    return keys.format, keys.eval_programs, stream, cfg
