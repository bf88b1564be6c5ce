"""Train one seed of the variable-binding study's model on the training split."""
from __future__ import annotations

import torch

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, load_base, path_of, section
from emergence.studies.binding.batches import encode_programs, predict_answers, sampler
from emergence.studies.binding.program_io import load_programs, subset
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.core.io import PipelineError, file_sha256
from emergence.core.models import build_model
from emergence.core.train import TrainConfig, train


def model_params(params: dict, n_tokens: int, d_vocab: int) -> tuple[str, dict]:
    """(arch, config dict) from binding_model, with the vocabulary filled in and the context checked."""
    values = dict(section(params, "binding_model"))
    arch = values.pop("arch", "transformer")
    if "d_vocab" in values:
        raise PipelineError("binding_model.d_vocab: set by the tokenizer, remove it from params")
    if values.get("n_ctx", 0) < n_tokens:
        raise PipelineError(f"binding_model.n_ctx: programs need {n_tokens} positions, got {values.get('n_ctx')}")
    return arch, {**values, "d_vocab": d_vocab}


def train_params(params: dict, seed: int, device: str) -> tuple[str, int, TrainConfig]:
    """(format, number of validation programs, TrainConfig) from binding_train."""
    values = dict(section(params, "binding_train"))
    fmt = values.pop("format", "answer_only")
    n_eval = values.pop("eval_programs", 500)
    if "seed" in values:
        raise PipelineError("binding_train.seed: seeds come from base.seeds, remove it here")
    cfg = from_dict(TrainConfig, {**values, "seed": seed, "device": device}, "binding_train")
    return fmt, n_eval, cfg


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True)
    base = load_base(params)
    programs_path = path_of(params, "binding_programs")
    programs = load_programs(programs_path)
    tok = CharTokenizer()
    fmt, n_eval, cfg = train_params(params, args.seed, base.device)
    arch, model_cfg = model_params(params, int(programs["program"].str.len().max()), len(tok))

    train_rows = subset(programs, "train")
    data = encode_programs(train_rows["program"], train_rows["answer"], tok, fmt)
    val_rows = subset(programs, "val", n=n_eval)
    val = encode_programs(val_rows["program"], val_rows["answer"], tok)

    def eval_fn(model: torch.nn.Module, step: int) -> dict[str, float]:
        return {"val_accuracy": float((predict_answers(model, val, tok) == val.answers.numpy()).mean())}

    torch.manual_seed(args.seed)  # initial weights are part of the run's fingerprint
    model = build_model(arch, model_cfg, "binding_model")
    run = f"seed{args.seed}"
    train(model, sampler(data, cfg.batch_size, args.seed), cfg,
          out_dir=path_of(params, "binding_runs") / run,
          scratch_dir=path_of(params, "binding_scratch") / run,
          eval_fn=eval_fn, data_fingerprint=f"{fmt}:{file_sha256(programs_path)}")


if __name__ == "__main__":
    raise SystemExit(main())
