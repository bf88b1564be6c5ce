"""An export loaded into TransformerLens 4 (`TransformerBridge`; its `HookedTransformer` is gone in 4.x):
its logits, and its hook values beside ours for the hook names both sides have. The optional extra
`.[interp]` installs it.

The raw bridge computes our logits. `enable_compatibility_mode()` applies HookedTransformer's weight
processing (folded norms, centred writing weights and unembedding): its logits are ours less their mean
over the vocabulary at each position, a constant per position, so log-probs are unchanged; the export
check compares the two `centred`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from emergence.core.io import PipelineError


def bridge(folder: Path, compatibility: bool = False):
    """TransformerLens 4's bridge over the HF export in `folder`, on the CPU: raw HF weights (no folding),
    or with compatibility mode's processing."""
    try:
        from transformer_lens.model_bridge import TransformerBridge
    except ImportError as e:
        raise PipelineError(f"--to transformer-lens needs TransformerLens 4: pip install -e '.[interp]' ({e})") from e
    b = TransformerBridge.boot_transformers(str(folder), device="cpu")
    if compatibility:
        b.enable_compatibility_mode(disable_warnings=True)
    return b


def bridge_logits(folder: Path, compatibility: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
    b = bridge(folder, compatibility)
    return lambda idx: b(idx, return_type="logits")


def centred(logits: torch.Tensor) -> torch.Tensor:
    """Each position's logits less their mean over the vocabulary: what compatibility mode's centred
    unembedding gives (softmax, hence log-probs, do not see the constant)."""
    return logits - logits.mean(-1, keepdim=True)


def hook_differences(model: torch.nn.Module, folder: Path, idx: torch.Tensor) -> dict[str, float | None]:
    """Per hook name both sides cache: max |difference| of the values, None where the shapes differ
    (a layout, not a value: e.g. heads before or after positions)."""
    with torch.no_grad():
        _, ours = model.run_with_cache(idx)
        _, theirs = bridge(folder).run_with_cache(idx)
        return {
            name: float((ours[name] - theirs[name]).abs().max()) if ours[name].shape == theirs[name].shape else None
            for name in sorted(set(ours) & set(theirs.keys()))
        }
