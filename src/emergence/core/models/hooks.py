"""Named hook points shared by every architecture in the zoo.

A model places identity `HookPoint` modules at the activations worth reading
or editing (`blocks.0.hook_resid_post`, `blocks.0.attn.hook_z`, ...). Analyses
attach functions to them only through `HookedModel.hooks(...)`, a context
manager that always removes what it added, so no hook can leak into a later
forward pass (there is deliberately no add-hook/reset-hooks API).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn as nn


def fp32_or_wider(dtype: torch.dtype) -> torch.dtype:
    """The dtype softmax and loss run in: fp32 under bf16 autocast, float64 where the model is float64."""
    return torch.promote_types(dtype, torch.float32)


# fn(activation, hook_name) -> replacement activation, or None to keep it.
HookFn = Callable[[torch.Tensor, str], torch.Tensor | None]
NameFilter = str | Callable[[str], bool]


class HookPoint(nn.Module):
    """Identity module marking a named activation; `name` is set by the model."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""

    @property
    def has_hooks(self) -> bool:
        # Lets a model skip work nobody listens to (e.g. materialising attention probs).
        return bool(self._forward_hooks or self._forward_pre_hooks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class HookedModel(nn.Module):
    """Base class: subclasses build their HookPoints, then call `_setup_hook_points()`.

    Contract for subclasses: `forward(idx (B, T) long, targets=None) -> (logits (B, T, V), loss | None)`.
    """

    def _setup_hook_points(self) -> None:
        for name, point in self.hook_points().items():
            point.name = name

    def hook_points(self) -> dict[str, HookPoint]:
        return {name: m for name, m in self.named_modules() if isinstance(m, HookPoint)}

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())  # shared (tied) weights counted once

    @contextmanager
    def hooks(self, fwd_hooks: list[tuple[NameFilter, HookFn]]) -> Iterator[HookedModel]:
        """Attach `fn(tensor, hook_name)` to every HookPoint matched by a name or predicate."""
        points = self.hook_points()
        handles = []
        try:
            for name_filter, fn in fwd_hooks:
                for name in _match(name_filter, points):
                    handles.append(points[name].register_forward_hook(_adapt(fn, name)))
            yield self
        finally:
            for handle in handles:
                handle.remove()

    def run_with_cache(
        self,
        idx: torch.Tensor,
        names: list[str] | Callable[[str], bool] | None = None,
        detach: bool = True,
        **forward_kwargs: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Forward `idx` (and e.g. `prefix=`) and return (logits, {hook_name: activation}) for the selected hooks.

        Selecting a `hook_pattern` makes the Transformer run that layer with an
        explicit softmax, which can differ from the fused path in the last float
        bits: compare patched runs with these logits, not with a plain forward.
        """
        cache: dict[str, torch.Tensor] = {}

        def store(t: torch.Tensor, name: str) -> None:
            cache[name] = t.detach() if detach else t

        if names is None:
            filters: list[NameFilter] = [lambda _: True]
        elif callable(names):
            filters = [names]
        else:
            filters = list(names)
        with self.hooks([(f, store) for f in filters]):
            logits, _ = self(idx, **forward_kwargs)
        return logits, cache


def _match(name_filter: NameFilter, points: dict[str, HookPoint]) -> list[str]:
    if callable(name_filter):
        return [name for name in points if name_filter(name)]
    if name_filter not in points:
        close = difflib.get_close_matches(name_filter, list(points), n=5, cutoff=0.5)
        raise KeyError(f"unknown hook point '{name_filter}'; close names: {', '.join(close) or 'none'}")
    return [name_filter]


def _adapt(fn: HookFn, name: str) -> Callable:
    # torch forward hooks get (module, inputs, output); a non-None return replaces output.
    def hook(module: nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor | None:
        return fn(output, name)

    return hook
