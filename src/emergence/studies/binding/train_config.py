"""binding_model and binding_train params -> (arch, model config) and TrainConfig."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from emergence.core.config import from_dict, section
from emergence.core.io import PipelineError
from emergence.core.train import TrainConfig
from emergence.studies.binding.programs import ProgramConfig

DISTRACTORS = ("natural", "planted")  # ProgramConfig.distractor
LINKS = ("any", "mixed")  # ProgramConfig.links


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
    distractor: str | None = None
    links: str | None = None


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


def train_params(params: dict, seed: int, device: str) -> tuple[str, int, Stream, TrainConfig]:
    """(format, number of validation programs, stream, TrainConfig) from binding_train."""
    values = dict(section(params, "binding_train"))
    fmt = values.pop("format", "answer_only")
    n_eval = values.pop("eval_programs", 500)
    stream = Stream(
        values.pop("stream", False),
        values.pop("stream_hop_weight_power", None),
        values.pop("stream_distractor", None),
        values.pop("stream_links", None),
    )
    if isinstance(n_eval, bool) or not isinstance(n_eval, int) or n_eval < 1:
        raise PipelineError(f"binding_train.eval_programs: an integer >= 1, got {n_eval!r}")
    if not isinstance(stream.on, bool):
        raise PipelineError(f"binding_train.stream: must be true or false, got {stream.on!r}")
    power = stream.hop_weight_power
    if power is not None and (isinstance(power, bool) or not isinstance(power, (int, float)) or not 0 <= power <= 20):
        raise PipelineError(f"binding_train.stream_hop_weight_power: a number in [0, 20] or null, got {power!r}")
    if stream.distractor not in (None, *DISTRACTORS):
        raise PipelineError(
            f"binding_train.stream_distractor: one of {', '.join(DISTRACTORS)} or null, got {stream.distractor!r}"
        )
    if stream.links not in (None, *LINKS):
        raise PipelineError(f"binding_train.stream_links: one of {', '.join(LINKS)} or null, got {stream.links!r}")
    if "seed" in values:
        raise PipelineError("binding_train.seed: seeds come from base.seeds, remove it here")
    cfg = from_dict(TrainConfig, {**values, "seed": seed, "device": device}, "binding_train")
    return fmt, n_eval, stream, cfg
