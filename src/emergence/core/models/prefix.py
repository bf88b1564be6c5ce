"""Environment prefixes: feature vectors (e.g. pooled DINOv2 patches) placed before the tokens.

A zoo LM whose config has d_prefix > 0 owns a learned linear map from the
features into its embedding space; `forward(idx, targets, prefix=(B, P, d_prefix))`
runs on the P projected positions followed by the T tokens, so every hook sees
P + T positions (the prefix first, as ENV positions). Logits cover all P + T
positions; the loss only the token positions.

Before the projection each feature dimension is standardised with a fixed mean
and std (buffers saved with the checkpoint; identity until `set_prefix_stats`
is called with the training features). Frozen encoders' features share a large
offset across images (a random-init DINOv2: the part that varies across images
is ~0.15 of the spread), which a projection initialised for unit-scale inputs
mostly passes on as a constant; standardising (a BatchNorm without affine, as
linear probes of frozen ViT features use) puts what varies at unit scale.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from emergence.core.models.hooks import HookPoint, fp32_or_wider

STD_FLOOR = 1e-5


def add_prefix_input(model: nn.Module, d_prefix: int, d_model: int) -> None:
    """Give `model` its prefix projection and hook point (before _setup_hook_points)."""
    if d_prefix:
        model.register_buffer("prefix_mean", torch.zeros(d_prefix))
        model.register_buffer("prefix_std", torch.ones(d_prefix))
        model.prefix_proj = nn.Linear(d_prefix, d_model)
        model.hook_prefix = HookPoint()  # (B, P, d_model)


def set_prefix_stats(model: nn.Module, features: torch.Tensor) -> None:
    """Fix the prefix standardisation to the per-dimension mean and std of `features` (N, P, d_prefix),
    over images and positions: the training images, never the evaluation ones."""
    flat = features.reshape(-1, features.shape[-1]).double()
    if len(flat) < 2:
        raise ValueError("set_prefix_stats needs at least two feature vectors")
    model.prefix_mean.copy_(flat.mean(0))
    # A dimension constant over the training images carries nothing: a floor keeps it from blowing up.
    model.prefix_std.copy_(flat.std(0).clamp(min=STD_FLOOR))


def prepend(model: nn.Module, x: torch.Tensor, prefix: torch.Tensor | None) -> torch.Tensor:
    """Token embeddings (B, T, d_model) -> (B, P + T, d_model) with the projected prefix first."""
    if prefix is None:
        return x
    if getattr(model, "prefix_proj", None) is None:
        raise ValueError("this model has no prefix input (config d_prefix = 0)")
    z = (prefix.to(x.dtype) - model.prefix_mean) / model.prefix_std
    return torch.cat([model.hook_prefix(model.prefix_proj(z)), x], dim=1)


def token_loss(logits: torch.Tensor, targets: torch.Tensor, n_prefix: int) -> torch.Tensor:
    """Cross-entropy of the token positions only: logits (B, P + T, V), targets (B, T); -1 is ignored."""
    return F.cross_entropy(
        logits[:, n_prefix:].flatten(0, 1).to(fp32_or_wider(logits.dtype)), targets.flatten(), ignore_index=-1
    )
