"""binding_model and binding_train params -> (arch, model config) and TrainConfig."""

from __future__ import annotations

from emergence.core.config import from_dict, section
from emergence.core.io import PipelineError
from emergence.core.train import TrainConfig


def model_params(params: dict, n_tokens: int, d_vocab: int) -> tuple[str, dict]:
    """(arch, config dict) from binding_model, with the vocabulary filled in and the context checked."""
    values = dict(section(params, "binding_model"))
    arch = values.pop("arch", "transformer")
    if "d_vocab" in values:
        raise PipelineError("binding_model.d_vocab: set by the tokenizer, remove it from params")
    if values.get("n_ctx", 0) < n_tokens:
        raise PipelineError(f"binding_model.n_ctx: programs need {n_tokens} positions, got {values.get('n_ctx')}")
    return arch, {**values, "d_vocab": d_vocab}


def train_params(params: dict, seed: int, device: str) -> tuple[str, int, bool, TrainConfig]:
    """(format, number of validation programs, stream, TrainConfig) from binding_train."""
    values = dict(section(params, "binding_train"))
    fmt = values.pop("format", "answer_only")
    n_eval = values.pop("eval_programs", 500)
    stream = values.pop("stream", False)
    if isinstance(n_eval, bool) or not isinstance(n_eval, int) or n_eval < 1:
        raise PipelineError(f"binding_train.eval_programs: an integer >= 1, got {n_eval!r}")
    if not isinstance(stream, bool):
        raise PipelineError(f"binding_train.stream: must be true or false, got {stream!r}")
    if "seed" in values:
        raise PipelineError("binding_train.seed: seeds come from base.seeds, remove it here")
    cfg = from_dict(TrainConfig, {**values, "seed": seed, "device": device}, "binding_train")
    return fmt, n_eval, stream, cfg
