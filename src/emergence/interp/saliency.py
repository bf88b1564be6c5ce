"""Attention saliency: how much each attention edge matters to one prediction.

For layer l and head h, S_{l,h} = A_{l,h} * dL/dA_{l,h} (element-wise, T x T),
L the target token's loss at the prediction position; the layer's flow is
I_l = | sum_h S_{l,h} |, the head's |S_{l,h}| (Wang et al. 2023, as used by Wu
et al., arXiv 2510.13796). Every layer and head comes from ONE backward pass:
the patterns are kept in the graph through the hook points and differentiated
together with torch.autograd.grad, instead of a forward-backward per layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _pattern_names(model: torch.nn.Module) -> list[str]:
    names = [n for n in model.hook_points() if n.endswith("attn.hook_pattern")]
    if not names:
        raise ValueError(f"{type(model).__name__} has no attention patterns to take saliency of")
    return sorted(names, key=lambda n: int(n.split(".")[1]))


def target_loss(logits: torch.Tensor, positions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Summed -log p(target) at each sequence's prediction position: (B, T, V) -> scalar."""
    rows = torch.arange(len(positions), device=logits.device)
    return -F.log_softmax(logits[rows, positions].float(), dim=-1)[rows, targets].sum()


def head_saliency(
    model: torch.nn.Module,
    idx: torch.Tensor,
    positions: torch.Tensor,
    targets: torch.Tensor,
    **forward_kwargs: torch.Tensor,
) -> torch.Tensor:
    """S for every layer and head in one backward pass: (L, B, H, T, T), signed.

    `positions` index the model's full sequence: with a `prefix=` forward
    argument, the P prefix positions come first.

    Sums over the batch are avoided: each sequence's loss only reaches its own
    patterns, so one backward of the summed loss gives every sequence's S.
    """
    names = _pattern_names(model)
    kept: dict[str, torch.Tensor] = {}

    def keep(pattern: torch.Tensor, name: str) -> None:
        kept[name] = pattern

    with torch.enable_grad(), model.hooks([(lambda n: n in names, keep)]):
        logits, _ = model(idx, **forward_kwargs)
        patterns = [kept[n] for n in names]  # each (B, H, T, T)
        grads = torch.autograd.grad(target_loss(logits, positions, targets), patterns)
    return torch.stack([(a * g).detach() for a, g in zip(patterns, grads)])


def layer_flow(saliency: torch.Tensor) -> torch.Tensor:
    """I_l = |sum_h S_{l,h}|: (L, B, H, T, T) -> (L, B, T, T)."""
    return saliency.sum(dim=2).abs()


def head_saliency_per_layer(
    model: torch.nn.Module, idx: torch.Tensor, positions: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """Reference: one forward and backward per layer with retain_grad (bench/saliency.py, tests)."""
    names = _pattern_names(model)
    out = []
    for name in names:
        kept: dict[str, torch.Tensor] = {}

        def keep(pattern: torch.Tensor, hook_name: str, kept: dict = kept) -> None:
            pattern.retain_grad()
            kept[hook_name] = pattern

        model.zero_grad(set_to_none=True)
        with torch.enable_grad(), model.hooks([(name, keep)]):
            logits, _ = model(idx)
            target_loss(logits, positions, targets).backward()
        out.append((kept[name] * kept[name].grad).detach())
    model.zero_grad(set_to_none=True)
    return torch.stack(out)
