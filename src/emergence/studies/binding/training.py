"""One training run of the binding model: on the training split, or on fresh programs drawn every step
(binding_train.stream), never on an evaluation program."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from emergence.core.config import load_base, path_of
from emergence.core.io import file_sha256
from emergence.core.models.registry import build_model
from emergence.core.train.loop import train
from emergence.studies.binding.batches import encode_programs, predict_answers, sampler
from emergence.studies.binding.program_io import load_programs, subset
from emergence.studies.binding.sets import load_program_config
from emergence.studies.binding.stream import stream_sampler
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.train_config import model_params, stream_programs, train_params


def train_binding(params: dict, seed: int, out_dir: Path, scratch_dir: Path, where: str) -> None:
    """Train seed `seed` with binding_model / binding_train of `params` into `out_dir` (resumable from
    `scratch_dir`); validation accuracy on binding_train.eval_programs of the val split."""
    base = load_base(params)
    programs_path = path_of(params, "binding_programs")
    programs = load_programs(programs_path)
    tok = CharTokenizer()
    fmt, n_eval, stream, cfg = train_params(params, seed, base.device)
    cfg = dataclasses.replace(cfg, **base.train_keys())
    arch, model_cfg = model_params(params, int(programs["program"].str.len().max()), len(tok))

    if stream.on:
        program_cfg = stream_programs(load_program_config(params), stream)
        held_out = frozenset(programs.loc[programs["split"] != "train", "program"])
        batch_fn = stream_sampler(program_cfg, fmt, tok, cfg.batch_size, seed, held_out)
        fingerprint = f"{fmt}:stream:{program_cfg}:{file_sha256(programs_path)}"
    else:
        train_rows = subset(programs, "train")
        batch_fn = sampler(encode_programs(train_rows["program"], train_rows["answer"], tok, fmt), cfg.batch_size, seed)
        fingerprint = f"{fmt}:{file_sha256(programs_path)}"
    fingerprint += f":eval{n_eval}"  # the validation programs scored: recorded in every checkpoint's meta
    val_rows = subset(programs, "val", n=n_eval, key="binding_train.eval_programs")
    val = encode_programs(val_rows["program"], val_rows["answer"], tok)

    def eval_fn(model: torch.nn.Module, step: int) -> dict[str, float]:
        return {"val_accuracy": float((predict_answers(model, val, tok) == val.answers.numpy()).mean())}

    torch.manual_seed(seed)  # initial weights are part of the run's fingerprint
    model = build_model(arch, model_cfg, "binding_model")
    train(
        model,
        batch_fn,
        cfg,
        out_dir=out_dir,
        scratch_dir=scratch_dir,
        eval_fn=eval_fn,
        data_fingerprint=fingerprint,
        where=where,
    )
