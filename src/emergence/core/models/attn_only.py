"""Attention-only model of the association study (Im et al., arXiv 2601.19208).

The residual stream is the vocabulary itself: h(0) = X, the one-hot tokens
(T x |V|), and every layer adds one attention head whose weights are |V| x |V|:

    h(l) = h(l-1) + softmax(mask(h(l-1) W(l) h(l-1)^T + DM(P(l)))) h(l-1) V(l)
    logits = h(L) W_O

DM(P) writes P[k] on the k-th sub-diagonal (k = t - k' >= 0): a learned
relative-position bias. Every weight starts at exactly zero, which is what
makes the paper's closed forms (src/emergence/studies/assoc/theory.py) the
leading terms of plain SGD.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from emergence.core.models.attn_only_config import AttnOnlyConfig
from emergence.core.models.hooks import HookedModel, HookPoint, fp32_or_wider
from emergence.core.models.registry import register


def diagonal_bias(P: torch.Tensor, T: int) -> torch.Tensor:
    """DM(P): (T, T) with P[t - k] at (t, k) for k <= t, -inf above the diagonal (causal mask)."""
    offset = torch.arange(T, device=P.device)[:, None] - torch.arange(T, device=P.device)[None, :]  # t - k
    return P[offset.clamp(min=0)].masked_fill(offset < 0, float("-inf"))


class VocabAttention(nn.Module):
    def __init__(self, cfg: AttnOnlyConfig) -> None:
        super().__init__()
        dtype = getattr(torch, cfg.dtype)
        self.W = nn.Parameter(torch.zeros(cfg.d_vocab, cfg.d_vocab, dtype=dtype))  # bilinear scores
        self.V = nn.Parameter(torch.zeros(cfg.d_vocab, cfg.d_vocab, dtype=dtype))  # value map
        self.P = nn.Parameter(torch.zeros(cfg.n_ctx, dtype=dtype))  # bias by distance t - k
        self.hook_scores = HookPoint()  # (B, 1, T, T), pre-softmax, after the mask
        self.hook_pattern = HookPoint()  # (B, 1, T, T), post-softmax (one head)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        T = h.shape[1]
        scores = (h @ self.W) @ h.transpose(1, 2) + diagonal_bias(self.P[:T], T)  # (B, T, T)
        pattern = self.hook_pattern(
            self.hook_scores(scores[:, None]).softmax(dim=-1, dtype=fp32_or_wider(scores.dtype))
        )  # (B, 1, T, T)
        return pattern[:, 0] @ (h @ self.V)  # (B, T, V)


class AttnOnlyBlock(nn.Module):
    def __init__(self, cfg: AttnOnlyConfig) -> None:
        super().__init__()
        self.attn = VocabAttention(cfg)
        self.hook_resid_pre, self.hook_attn_out, self.hook_resid_post = HookPoint(), HookPoint(), HookPoint()

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.hook_resid_pre(h)  # (B, T, V)
        return self.hook_resid_post(h + self.hook_attn_out(self.attn(h)))


@register("attn_only", AttnOnlyConfig)
class AttnOnly(HookedModel):
    def __init__(self, config: AttnOnlyConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        self.blocks = nn.ModuleList(AttnOnlyBlock(config) for _ in range(config.n_layers))
        self.W_O = nn.Parameter(torch.zeros(config.d_vocab, config.d_vocab, dtype=getattr(torch, config.dtype)))
        self._setup_hook_points()

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        T = idx.shape[1]
        if T > self.config.n_ctx:
            raise ValueError(f"sequence length {T} exceeds n_ctx {self.config.n_ctx}")
        h = F.one_hot(idx, self.config.d_vocab).to(self.W_O.dtype)  # (B, T, V)
        for block in self.blocks:
            h = block(h)
        logits = h @ self.W_O  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(
            logits.flatten(0, 1).to(fp32_or_wider(logits.dtype)), targets.flatten(), ignore_index=-1
        )

    def weight(self, name: str, layer: int | None = None) -> torch.Tensor:
        """W_O, or W / V / P of `layer`: the matrices the theory predicts."""
        if name == "W_O":
            return self.W_O
        return getattr(self.blocks[layer].attn, name)
