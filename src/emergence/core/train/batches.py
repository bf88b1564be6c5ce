"""Batch samplers over fixed-length token windows, shared by the text studies."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch


def epoch_rows(n: int, batch_size: int, seed: int) -> Callable[[int], np.ndarray]:
    """rows(step) -> the (sorted) row numbers of that step's batch out of n rows.

    Every epoch visits a (seed, epoch)-dependent permutation in n // batch_size
    whole batches (the remainder sits the epoch out), so the data is a pure
    function of (seed, step), as exact resume needs. batch_size == n is full
    batch: every row every step.
    """
    per_epoch = n // batch_size

    def rows(step: int) -> np.ndarray:
        if batch_size == n:
            return np.arange(n)
        order = np.random.default_rng([seed, step // per_epoch]).permutation(n)
        return np.sort(order[(step % per_epoch) * batch_size :][:batch_size])

    return rows


def epoch_batches(sequences: np.ndarray, batch_size: int, seed: int):
    """batch_fn(step) -> (inputs, next tokens), each (batch, T), from (N, T + 1) windows drawn by epoch_rows."""
    rows = epoch_rows(len(sequences), batch_size, seed)

    def batch_fn(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        block = torch.from_numpy(np.asarray(sequences[rows(step)], dtype=np.int64))
        return block[:, :-1], block[:, 1:]

    return batch_fn
