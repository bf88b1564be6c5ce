"""What the grounding stages read from the pipeline: runs, vocabulary, held-out contexts, windows.

One place for the params keys and artifact schemas, so the stages stay thin and
agree on what a run, a checkpoint list or a training window is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from emergence.core.config import from_dict, path_of, section
from emergence.core.io import PipelineError, read_parquet, read_parquets
from emergence.core.train.checkpoint import list_checkpoints, load_checkpoint
from emergence.studies.grounding.inputs_params import (
    SaliencyParams,
    seq_len,
)
from emergence.studies.grounding.tokens import (
    GroundingRuns,
    marked_table,
    model_entry,
    read_vocab,
    training_windows,
)

RUN_KEYS = {"model": "O", "seed": "i", "step": "i"}  # the key columns of every per-run table


def runs_of(params: dict) -> GroundingRuns:
    return from_dict(GroundingRuns, section(params, "grounding_runs"), "grounding_runs")


def run_checkpoints(params: dict, run: str, study: str = "grounding") -> list[tuple[int, Path]]:
    """(step, path) of a run's checkpoints under paths.{study}_runs, e.g. study = visual."""
    run_dir = path_of(params, f"{study}_runs") / run
    ckpts = list_checkpoints(run_dir)
    if not ckpts:
        raise PipelineError(f"{run_dir}: no checkpoints (run {study}_train first)")
    return ckpts


def checkpoint_models(
    params: dict, run: str, desc: str, study: str = "grounding"
) -> Iterator[tuple[int, torch.nn.Module]]:
    """(step, model) of each checkpoint of a run, loaded one at a time behind a progress bar."""
    for step, path in tqdm(run_checkpoints(params, run, study), desc=f"{desc} {run}"):
        yield step, load_checkpoint(path)[0]


def vocab_index(params: dict) -> tuple[list[str], dict[str, int]]:
    """(target nouns, token -> id)."""
    targets, vocab, _ = read_vocab(path_of(params, "grounding_vocab"))
    return targets, {t: i for i, t in enumerate(vocab)}


def eval_set(params: dict) -> pd.DataFrame:
    return read_parquet(path_of(params, "grounding_eval"), {"turn": "i", "word": "O", "context": "O", "others": "O"})


def raw_turns(params: dict) -> pd.DataFrame:
    """The extracted turns: every env word w<ENV>, every spoken word w<LAN> (what grounding_vocab reads)."""
    return read_parquet(path_of(params, "childes_turns"), {"file": "O", "tokens": "O"})


def turns(params: dict) -> pd.DataFrame:
    """The turns under the vocabulary's word rule (env_marking): what every stage after grounding_vocab reads."""
    targets, _, marking = read_vocab(path_of(params, "grounding_vocab"))
    return marked_table(raw_turns(params), targets, marking)


def train_windows(params: dict, index: dict[str, int]) -> np.ndarray:
    """(N, seq_len + 1) token windows of the transcripts with the held-out turns removed."""
    held_out = set(eval_set(params)["turn"].tolist())
    return training_windows(turns(params), held_out, index, seq_len(params), "grounding_train.seq_len")


def checked_attention_models(params: dict, where: str, run_models: list[str], runs_where: str) -> SaliencyParams:
    """Section `where` (e.g. visual_saliency): its models, each one of `run_models` with attention heads."""
    p = from_dict(SaliencyParams, section(params, where), where)
    for name in p.models:
        if name not in run_models:
            raise PipelineError(f"{where}.models: {name!r} is not in {runs_where}.models {run_models}")
        arch, _ = model_entry(section(params, "grounding_models"), name)
        if arch != "transformer":
            raise PipelineError(f"{where}.models: {name!r} is a {arch}, which has no attention heads")
    return p


def saliency_batch_size(params: dict, where: str = "grounding_saliency") -> int:
    """A saliency stage's batch size, read without the run lists (see checked_run for why)."""
    return from_dict(SaliencyParams, section(params, where), where).batch_size


def attention_models(params: dict) -> SaliencyParams:
    """grounding_saliency's models, each a configured run model with attention heads."""
    return checked_attention_models(params, "grounding_saliency", runs_of(params).models, "grounding_runs")


def run_file(params: dict, path_key: str, run: str) -> Path:
    """A per-run Parquet artifact, e.g. data/grounding/saliency/transformer_seed0.parquet."""
    return path_of(params, path_key) / f"{run}.parquet"


def per_run(
    params: dict, path_key: str, runs: list[str], columns: dict[str, str], keys: dict[str, str] = RUN_KEYS
) -> tuple[pd.DataFrame, list[Path]]:
    """The per-run artifacts of `runs` concatenated, with their key and `columns` checked; and their files."""
    files = [run_file(params, path_key, run) for run in runs]
    return read_parquets(files, {**keys, **columns}), files


def spread_checkpoints(ckpts: list[tuple[int, Path]], n: int) -> list[tuple[int, Path]]:
    """About n checkpoints spaced evenly in log(step), the last always among them."""
    if n >= len(ckpts):
        return ckpts
    steps = np.array([max(s, 1) for s, _ in ckpts], dtype=float)
    wanted = np.geomspace(steps[0], steps[-1], n)
    picked = {int(np.abs(np.log(steps) - np.log(w)).argmin()) for w in wanted} | {len(ckpts) - 1}
    return [ckpts[i] for i in sorted(picked)]
