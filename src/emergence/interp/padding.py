"""Batches of variable-length token contexts for the interpretability tools."""

from __future__ import annotations

from collections.abc import Sequence

import torch

# Contexts per forward pass when reading predictions at the contexts' last tokens. Small: on a CPU,
# HF's torch Mamba-2 scan ran 200 contexts of 16 tokens 2.2x slower as one batch than in batches
# of 16-32 (paper-size Mamba-2, one thread, 2026-11-28); a Transformer's time was flat from 16 to 200.
EVAL_BATCH = 32


def right_pad(
    contexts: Sequence[Sequence[int]], device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (B, T_max) padded with 0 after each context, and the lengths (B,)."""
    lengths = torch.tensor([len(c) for c in contexts], device=device)
    idx = torch.zeros(len(contexts), int(lengths.max()), dtype=torch.long, device=device)
    for i, c in enumerate(contexts):
        idx[i, : len(c)] = torch.tensor(c, device=device)
    return idx, lengths
