"""Train one language model of the grounding study (one run per architecture and seed).

The training windows are each transcript's token stream with the held-out
evaluation turns removed, cut into seq_len + 1-token windows.
"""
from __future__ import annotations

import torch

from emergence.cli import stage_main, start_stage
from emergence.config import from_dict, load_base, path_of, section
from emergence.data.grounding import GroundingRuns, read_vocab, run_name, training_windows
from emergence.io import PipelineError, file_sha256, read_parquet
from emergence.models import build_model
from emergence.train import TrainConfig, train
from emergence.train.batches import epoch_batches

@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_arch=True)
    runs = from_dict(GroundingRuns, section(params, "grounding_runs"), "grounding_runs")
    if args.arch not in runs.archs or args.seed not in runs.seeds:
        raise PipelineError(f"grounding_runs: run {args.arch} seed {args.seed} is not in archs x seeds")
    values = dict(section(params, "grounding_train"))
    seq_len = values.pop("seq_len", 64)
    cfg = from_dict(TrainConfig, {**values, "seed": args.seed, "device": load_base(params).device},
                    "grounding_train")
    _, vocab = read_vocab(path_of(params, "grounding_vocab"))
    turns = read_parquet(path_of(params, "childes_turns"), {"file": "O", "tokens": "O"})
    held_out = set(read_parquet(path_of(params, "grounding_eval"), {"turn": "i"})["turn"].tolist())
    windows = training_windows(turns, held_out, {t: i for i, t in enumerate(vocab)}, seq_len)
    if cfg.batch_size > len(windows):
        raise PipelineError(f"grounding_train.batch_size: only {len(windows)} training windows, got {cfg.batch_size}")
    model_cfg = dict(section(section(params, "grounding_models"), args.arch))
    torch.manual_seed(args.seed)  # initial weights are part of the run's fingerprint
    model = build_model(args.arch, {**model_cfg, "d_vocab": len(vocab), "n_ctx": seq_len},
                        f"grounding_models.{args.arch}")
    run = run_name(args.arch, args.seed)
    train(model, epoch_batches(windows, cfg.batch_size, args.seed), cfg,
          out_dir=path_of(params, "grounding_runs") / run, scratch_dir=path_of(params, "grounding_scratch") / run,
          data_fingerprint=file_sha256(path_of(params, "childes_turns")) + file_sha256(path_of(params, "grounding_eval")))


if __name__ == "__main__":
    raise SystemExit(main())
