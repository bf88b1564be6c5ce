"""Batch samplers over fixed-length token windows, shared by the text studies."""
from __future__ import annotations

import numpy as np
import torch


def epoch_batches(sequences: np.ndarray, batch_size: int, seed: int):
    """batch_fn(step) -> (inputs, next tokens), each (batch, T), from (N, T + 1) windows.

    Every epoch visits a (seed, epoch)-dependent permutation in N // batch_size
    whole batches (the remainder sits the epoch out), so the data is a pure
    function of (seed, step), as exact resume needs. batch_size == N is full
    batch: the same corpus every step.
    """
    n = len(sequences)
    per_epoch = n // batch_size

    def batch_fn(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if batch_size == n:
            rows = sequences
        else:
            order = np.random.default_rng([seed, step // per_epoch]).permutation(n)
            rows = sequences[np.sort(order[(step % per_epoch) * batch_size:][:batch_size])]
        block = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        return block[:, :-1], block[:, 1:]

    return batch_fn
