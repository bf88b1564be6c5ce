"""Attention-head ablation on any hooked model: replace heads' outputs, re-run.

Each head's output (`blocks.{L}.attn.hook_z`, (B, T, H, d_head)) is set to
zero or to its per-position mean over a reference set, inside a hook context,
so the model is untouched afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from emergence.core.models.hooks import HookedModel
from emergence.interp.ablation_modes import MODES


def z_name(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_z"


def mean_head_activations(
    model: HookedModel, idx: torch.Tensor, lengths: torch.Tensor | None = None, batch_size: int = 256
) -> dict[int, torch.Tensor]:
    """{layer: (T, H, d_head)} mean head output per position over the programs in `idx` (N, T).
    With `lengths` (N,), position t averages only the programs that reach it (no padding)."""
    with torch.no_grad():
        N, T = idx.shape
        lengths = torch.full((N,), T) if lengths is None else lengths
        covers = (torch.arange(T)[None, :] < lengths[:, None]).float()  # (N, T)
        names = [z_name(layer) for layer in range(model.config.n_layers)]
        sums = {layer: torch.zeros(()) for layer in range(len(names))}
        for s in range(0, N, batch_size):
            _, cache = model.run_with_cache(idx[s : s + batch_size], names)
            weight = covers[s : s + batch_size, :, None, None]  # (B, T, 1, 1)
            for layer, name in enumerate(names):
                sums[layer] = sums[layer] + (cache[name] * weight).sum(0)
        count = covers.sum(0).clamp(min=1)[:, None, None]  # (T, 1, 1)
        return {layer: total / count for layer, total in sums.items()}


def ablation_hook(layer: int, head: int | Sequence[int], mode: str, mean_z: dict[int, torch.Tensor] | None):
    if mode not in MODES:
        raise ValueError(f"ablation mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "mean" and mean_z is None:
        raise ValueError("mean ablation needs mean_z from mean_head_activations")
    heads = [head] if isinstance(head, int) else list(head)

    def ablate(z: torch.Tensor, _: str) -> torch.Tensor:  # (B, T, H, d_head)
        z = z.clone()
        z[:, :, heads] = 0.0 if mode == "zero" else mean_z[layer][: z.shape[1], heads]
        return z

    return z_name(layer), ablate


def ablate_heads(
    model: HookedModel,
    idx: torch.Tensor,
    layer: int,
    head: int | Sequence[int],
    mode: str,
    mean_z: dict[int, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Logits (B, T, V) with head(s) `head` of `layer` zeroed or set to their mean."""
    with torch.no_grad():
        with model.hooks([ablation_hook(layer, head, mode, mean_z)]):
            logits, _ = model(idx)
        return logits
