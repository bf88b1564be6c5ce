"""Train one language model of the visual-dialogue study (one run per setting, model and seed).

caption: windows of the dialog token stream (caption words as w<ENV>), as in the
text study. image: one sequence per dialog without its caption, read after its
image's DINOv2 features (a prefix projected into the embedding space), each
feature dimension standardised with the training images' mean and std (fixed,
saved with the model: models/prefix.py). Held-out evaluation dialogs never
enter training.
"""

from __future__ import annotations

import numpy as np
import torch

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, load_base, path_of, section
from emergence.core.io import PipelineError, file_sha256
from emergence.core.models import build_model
from emergence.core.models.prefix import set_prefix_stats
from emergence.core.train import TrainConfig, train
from emergence.core.train.batches import epoch_batches
from emergence.studies.grounding import visual_inputs as inputs
from emergence.studies.grounding.tokens import model_entry, training_windows
from emergence.studies.grounding.visual_data import dialog_sequences, image_batches


def batches(params: dict, setting: str, index: dict[str, int], batch_size: int, seed: int):
    """(batch_fn, model config additions, number of training sequences, features of the distinct
    training images or None) of one setting."""
    dialogs, seq_len = inputs.dialogs(params), inputs.seq_len(params)
    held_out = set(inputs.eval_set(params)["turn"].tolist())
    if setting == "caption":
        windows = training_windows(dialogs, held_out, index, seq_len)
        return epoch_batches(windows, batch_size, seed), {"n_ctx": seq_len}, len(windows), None
    feats, image_row, _ = inputs.features(params)
    ids, image_ids = dialog_sequences(dialogs, held_out, index, seq_len)
    if missing := sorted(set(image_ids.tolist()) - set(image_row)):
        raise PipelineError(
            f"{path_of(params, 'visual_features')}: no features for image_id {missing[0]} "
            f"({len(missing)} training images lack them)"
        )
    rows = np.array([image_row[i] for i in image_ids.tolist()], dtype=np.int64)
    extra = {"n_ctx": seq_len + feats.shape[1], "d_prefix": feats.shape[2]}
    return image_batches(ids, rows, feats, batch_size, seed), extra, len(ids), feats[torch.from_numpy(np.unique(rows))]


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True, per_setting=True)
    run = inputs.checked_run(args.setting, args.model, args.seed)
    arch, model_cfg = model_entry(section(params, "grounding_models"), args.model)
    values = {k: v for k, v in section(params, "visual_train").items() if k != "seq_len"}
    cfg = from_dict(TrainConfig, {**values, "seed": args.seed, "device": load_base(params).device}, "visual_train")
    _, index = inputs.vocab_index(params)
    batch_fn, extra, n, train_features = batches(params, args.setting, index, cfg.batch_size, args.seed)
    if cfg.batch_size > n:
        raise PipelineError(f"visual_train.batch_size: only {n} training sequences, got {cfg.batch_size}")
    torch.manual_seed(args.seed)  # initial weights are part of the run's fingerprint
    model = build_model(arch, {**model_cfg, "d_vocab": len(index), **extra}, f"grounding_models.{args.model}")
    if train_features is not None:
        set_prefix_stats(model, train_features)
    fingerprint = file_sha256(path_of(params, "visual_dialogs")) + file_sha256(path_of(params, "visual_eval"))
    if args.setting == "image":
        fingerprint += file_sha256(path_of(params, "visual_features") / "features.safetensors")
    train(
        model,
        batch_fn,
        cfg,
        out_dir=path_of(params, "visual_runs") / run,
        scratch_dir=path_of(params, "visual_scratch") / run,
        data_fingerprint=fingerprint,
    )


if __name__ == "__main__":
    raise SystemExit(main())
