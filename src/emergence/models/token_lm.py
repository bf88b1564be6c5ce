"""Shared shell of the recurrent zoo models: embed -> blocks -> final norm -> head."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from emergence.models.hooks import HookedModel


class TokenLM(HookedModel):
    """Subclasses set `config.n_ctx`, `embed`, `hook_embed`, `blocks`, `ln_final` and `lm_head`."""

    def readout(self, resid: torch.Tensor) -> torch.Tensor:
        """Logits (..., d_vocab) of a residual stream (..., d_model) read at any layer."""
        return self.lm_head(self.ln_final(resid))

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        T = idx.shape[1]
        if T > self.config.n_ctx:
            raise ValueError(f"sequence length {T} exceeds n_ctx {self.config.n_ctx}")
        x = self.hook_embed(self.embed(idx))  # (B, T, d_model)
        for block in self.blocks:
            x = block(x)
        logits = self.readout(x)  # (B, T, d_vocab)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
