"""The word-rule ablation: train grounding_marking's model and seed on the transcripts with every word
marked (env_marking: all), same targets, held-out turns and training settings as the default runs; write
its checkpoints and the final G(v) on held-out turns and on the templates (studies/grounding/marking.py)."""

from __future__ import annotations

import torch

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, load_base, path_of, section
from emergence.core.io import PipelineError, file_sha256, write_parquet
from emergence.core.models.registry import build_model
from emergence.core.train.batches import epoch_batches
from emergence.core.train.checkpoint import list_checkpoints, load_checkpoint
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import train
from emergence.studies.grounding import inputs
from emergence.studies.grounding.marking import all_marked_inputs, final_word_gains
from emergence.studies.grounding.marking_params import MarkingParams
from emergence.studies.grounding.settings import Corpus
from emergence.studies.grounding.templates import read_templates
from emergence.studies.grounding.tokens import VocabParams, model_entry, read_vocab, run_name, training_windows


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(MarkingParams, section(params, "grounding_marking"), "grounding_marking")
    arch, model_cfg = model_entry(section(params, "grounding_models"), p.model)
    vocab_params = from_dict(VocabParams, section(params, "grounding_vocab"), "grounding_vocab")
    targets, _, _ = read_vocab(path_of(params, "grounding_vocab"))
    eval_set = inputs.eval_set(params)
    table, vocab, eval_all = all_marked_inputs(
        inputs.raw_turns(params), targets, eval_set, vocab_params.min_token_count
    )
    index = {t: i for i, t in enumerate(vocab)}
    held_out = set(eval_all["turn"].tolist())
    seq_len = Corpus("childes").seq_len(params)
    windows = training_windows(table, held_out, index, seq_len, "grounding_train.seq_len")
    values = {k: v for k, v in section(params, "grounding_train").items() if k != "seq_len"}
    cfg = from_dict(TrainConfig, {**values, **load_base(params).train_keys(), "seed": p.seed}, "grounding_train")
    if cfg.batch_size > len(windows):
        raise PipelineError(f"grounding_train.batch_size: only {len(windows)} training sequences, got {cfg.batch_size}")
    torch.manual_seed(p.seed)  # seeded as the default run; not its weights (the all-marked vocabulary is larger)
    model = build_model(arch, {**model_cfg, "d_vocab": len(index), "n_ctx": seq_len}, f"grounding_models.{p.model}")
    out = path_of(params, "grounding_marking")
    run = run_name(p.model, p.seed)
    fingerprint = "".join(
        file_sha256(path_of(params, k)) for k in ("childes_turns", "grounding_vocab", "grounding_eval")
    )
    train(
        model,
        epoch_batches(windows, cfg.batch_size, p.seed),
        cfg,
        out_dir=out / run,
        scratch_dir=path_of(params, "grounding_scratch") / f"marking_{run}",
        data_fingerprint=f"marking:all:{fingerprint}",
        where="grounding_train",
    )
    step, last = list_checkpoints(out / run)[-1]
    training = [tokens for i, tokens in zip(table.index, table["tokens"]) if i not in held_out]
    templates = read_templates(path_of(params, "grounding_template_source"))
    gains = final_word_gains(load_checkpoint(last)[0], eval_all, templates, training, targets, index)
    write_parquet(gains.assign(model=p.model, seed=p.seed, step=step), out / "gain.parquet")


if __name__ == "__main__":
    raise SystemExit(main())
