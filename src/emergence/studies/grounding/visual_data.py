"""Study G in visual dialogue: the two settings' evaluation contexts and training data.

Input is the dialog table of `visdial.extract_dialogs` (one row per dialog, its
`tokens` = caption words as w<ENV>, then <Q>/<A> turns as w<LAN>).

- caption setting: exactly the text setting on dialogs: the caption is the
  environment, held-out contexts run from the caption to the first v<LAN>,
  mismatched contexts swap the caption's v<ENV> for u<ENV>;
- image setting: the caption is dropped and the image (its DINOv2 features) is
  the environment, read as a prefix; the same held-out dialogs are cut before
  the first v<LAN>, and mismatched contexts pair the dialogue with the images
  of other dialogs whose captions do not name v.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from emergence.core.io import PipelineError
from emergence.core.train.batches import epoch_rows
from emergence.studies.grounding.tokens import encode, env


def without_env(tokens: Sequence[str], n_env: int) -> list[str]:
    """A dialog's tokens (or a context cut from them) without its caption, the first n_env tokens: what
    the image setting reads. By position, not by the <ENV> mark, which the word rule keeps only on
    target nouns."""
    return list(tokens[n_env:])


def other_images(dialogs: pd.DataFrame, eval_set: pd.DataFrame, n_mismatched: int, seed: int) -> list[list[int]]:
    """For each evaluation context, n_mismatched image ids of other dialogs whose caption lacks v<ENV>."""
    rng = np.random.default_rng(seed)
    captions = [set(tokens) for tokens in dialogs["env"]]
    image_ids = dialogs["image_id"].to_numpy()
    out = []
    for turn, word in zip(eval_set["turn"], eval_set["word"]):
        pool = sorted(
            {int(image_ids[i]) for i, c in enumerate(captions) if env(word) not in c} - {int(image_ids[turn])}
        )
        if len(pool) < n_mismatched:
            raise PipelineError(f"visual_eval.n_mismatched: only {len(pool)} images lack '{word}', got {n_mismatched}")
        out.append(sorted(rng.choice(pool, n_mismatched, replace=False).tolist()))
    return out


def dialog_sequences(
    dialogs: pd.DataFrame, held_out: set[int], index: dict[str, int], seq_len: int
) -> tuple[np.ndarray, np.ndarray]:
    """Image-setting training data: one sequence per training dialog, caption removed.

    Returns ids (N, seq_len + 1) int64, right-padded with -1 (targets ignore -1;
    inputs read it as token 0, which only ever follows the real tokens), and the
    image id of each row (N,).
    """
    rows = [i for i in range(len(dialogs)) if i not in held_out]
    if not rows:
        raise PipelineError("visual_train: every dialog is held out for evaluation")
    ids = np.full((len(rows), seq_len + 1), -1, dtype=np.int64)
    for r, i in enumerate(rows):
        tokens = encode(without_env(dialogs["tokens"].iloc[i], len(dialogs["env"].iloc[i])), index)[: seq_len + 1]
        ids[r, : len(tokens)] = tokens
    return ids, dialogs["image_id"].to_numpy()[rows].astype(np.int64)


def image_batches(ids: np.ndarray, image_rows: np.ndarray, features: torch.Tensor, batch_size: int, seed: int):
    """batch_fn for the training loop: ({"idx", "prefix"}, targets) from (N, seq_len + 1) dialog ids,
    rows drawn by `epoch_rows` (a pure function of seed and step: exact resume).
    `image_rows` (N,) index `features` (N_images, P, d)."""
    pick = epoch_rows(len(ids), batch_size, seed)

    def batch_fn(step: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        rows = pick(step)
        x = torch.from_numpy(ids[rows])  # (B, seq_len + 1), -1 = padding
        prefix = features[torch.from_numpy(image_rows[rows])]  # (B, P, d)
        return {"idx": x[:, :-1].clamp(min=0), "prefix": prefix}, x[:, 1:]

    return batch_fn
