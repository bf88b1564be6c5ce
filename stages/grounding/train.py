"""Train one language model of the grounding study (one run per setting, model and seed).

childes and caption: windows of seq_len + 1 tokens cut from each transcript's
(dialog's) token stream, environment words as w<ENV>. image: one sequence per
dialog without its caption, read after its image's DINOv2 features (a prefix
projected into the embedding space), each feature dimension standardised with
the training images' mean and std (fixed, saved with the model:
core/models/prefix.py). Held-out evaluation contexts never enter training.
"""

from __future__ import annotations

import numpy as np
import torch

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, load_base, path_of, section
from emergence.core.io import PipelineError, file_sha256
from emergence.core.models.prefix import set_prefix_stats
from emergence.core.models.registry import build_model
from emergence.core.train.batches import epoch_batches
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import train
from emergence.studies.grounding import visual_inputs
from emergence.studies.grounding.settings import Setting
from emergence.studies.grounding.tokens import model_entry, training_windows
from emergence.studies.grounding.visual_data import dialog_sequences, image_batches


def training_data(params: dict, setting: Setting, index: dict[str, int], batch_size: int, seed: int):
    """(batch_fn, model config additions, number of training sequences, features of the distinct
    training images or None) of one setting."""
    table, seq_len = setting.corpus.table(params), setting.corpus.seq_len(params)
    held_out = set(setting.corpus.eval_set(params)["turn"].tolist())
    if setting.name != "image":
        windows = training_windows(table, held_out, index, seq_len, f"{setting.key('train')}.seq_len")
        return epoch_batches(windows, batch_size, seed), {"n_ctx": seq_len}, len(windows), None
    feats, image_row, _ = visual_inputs.features(params)
    ids, image_ids = dialog_sequences(table, held_out, index, seq_len)
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
    setting = Setting(args.setting)
    run = setting.run(args.model, args.seed)
    arch, model_cfg = model_entry(section(params, "grounding_models"), args.model)
    where = setting.key("train")
    values = {k: v for k, v in section(params, where).items() if k != "seq_len"}
    cfg = from_dict(TrainConfig, {**values, **load_base(params).train_keys(), "seed": args.seed}, where)
    _, index = setting.corpus.vocab_index(params)
    batch_fn, extra, n, train_features = training_data(params, setting, index, cfg.batch_size, args.seed)
    if cfg.batch_size > n:
        raise PipelineError(f"{where}.batch_size: only {n} training sequences, got {cfg.batch_size}")
    torch.manual_seed(args.seed)  # initial weights are part of the run's fingerprint
    model = build_model(arch, {**model_cfg, "d_vocab": len(index), **extra}, f"grounding_models.{args.model}")
    if train_features is not None:
        set_prefix_stats(model, train_features)
    fingerprint = file_sha256(path_of(params, setting.corpus.table_key))
    fingerprint += file_sha256(path_of(params, setting.corpus.key("vocab")))  # the word rule and token ids
    fingerprint += file_sha256(path_of(params, setting.key("eval")))
    if setting.name == "image":
        fingerprint += file_sha256(path_of(params, "visual_features") / "features.safetensors")
    train(
        model,
        batch_fn,
        cfg,
        out_dir=path_of(params, setting.key("runs")) / run,
        scratch_dir=path_of(params, setting.key("scratch")) / run,
        data_fingerprint=fingerprint,
        where=where,
    )


if __name__ == "__main__":
    raise SystemExit(main())
