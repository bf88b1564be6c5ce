"""Batches of variable-length token contexts for the interpretability tools."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def right_pad(
    contexts: Sequence[Sequence[int]], device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (B, T_max) padded with 0 after each context, and the lengths (B,)."""
    lengths = torch.tensor([len(c) for c in contexts], device=device)
    idx = torch.zeros(len(contexts), int(lengths.max()), dtype=torch.long, device=device)
    for i, c in enumerate(contexts):
        idx[i, : len(c)] = torch.tensor(c, device=device)
    return idx, lengths
