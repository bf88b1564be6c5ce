"""Train one language model of the grounding study (one run per model and seed).

The training windows are each transcript's token stream with the held-out
evaluation turns removed, cut into seq_len + 1-token windows.
"""

from __future__ import annotations

import torch

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, load_base, path_of, section
from emergence.core.io import PipelineError, file_sha256
from emergence.core.models import build_model
from emergence.core.train import TrainConfig, train
from emergence.core.train.batches import epoch_batches
from emergence.studies.grounding import inputs
from emergence.studies.grounding.tokens import model_entry


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True)
    run = inputs.checked_run(args.model, args.seed)
    arch, model_cfg = model_entry(section(params, "grounding_models"), args.model)
    values = {k: v for k, v in section(params, "grounding_train").items() if k != "seq_len"}
    cfg = from_dict(TrainConfig, {**values, "seed": args.seed, "device": load_base(params).device}, "grounding_train")
    _, index = inputs.vocab_index(params)
    windows = inputs.train_windows(params, index)
    if cfg.batch_size > len(windows):
        raise PipelineError(f"grounding_train.batch_size: only {len(windows)} training windows, got {cfg.batch_size}")
    torch.manual_seed(args.seed)  # initial weights are part of the run's fingerprint
    model = build_model(
        arch, {**model_cfg, "d_vocab": len(index), "n_ctx": inputs.seq_len(params)}, f"grounding_models.{args.model}"
    )
    train(
        model,
        epoch_batches(windows, cfg.batch_size, args.seed),
        cfg,
        out_dir=path_of(params, "grounding_runs") / run,
        scratch_dir=path_of(params, "grounding_scratch") / run,
        data_fingerprint=file_sha256(path_of(params, "childes_turns")) + file_sha256(path_of(params, "grounding_eval")),
    )


if __name__ == "__main__":
    raise SystemExit(main())
