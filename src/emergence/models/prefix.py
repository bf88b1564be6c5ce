"""Environment prefixes: feature vectors (e.g. pooled DINOv2 patches) placed before the tokens.

A zoo LM whose config has d_prefix > 0 owns a learned linear map from the
features into its embedding space; `forward(idx, targets, prefix=(B, P, d_prefix))`
runs on the P projected positions followed by the T tokens, so every hook sees
P + T positions (the prefix first, as ENV positions). Logits cover all P + T
positions; the loss only the token positions.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from emergence.models.hooks import HookPoint


def add_prefix_input(model: nn.Module, d_prefix: int, d_model: int) -> None:
    """Give `model` its prefix projection and hook point (before _setup_hook_points)."""
    if d_prefix:
        model.prefix_proj = nn.Linear(d_prefix, d_model)
        model.hook_prefix = HookPoint()  # (B, P, d_model)


def prepend(model: nn.Module, x: torch.Tensor, prefix: torch.Tensor | None) -> torch.Tensor:
    """Token embeddings (B, T, d_model) -> (B, P + T, d_model) with the projected prefix first."""
    if prefix is None:
        return x
    if getattr(model, "prefix_proj", None) is None:
        raise ValueError("this model has no prefix input (config d_prefix = 0)")
    return torch.cat([model.hook_prefix(model.prefix_proj(prefix.to(x.dtype))), x], dim=1)


def token_loss(logits: torch.Tensor, targets: torch.Tensor, n_prefix: int) -> torch.Tensor:
    """Cross-entropy of the token positions only: logits (B, P + T, V), targets (B, T); -1 is ignored."""
    return F.cross_entropy(logits[:, n_prefix:].flatten(0, 1), targets.flatten(), ignore_index=-1)
