"""Shared shell of the recurrent zoo models: embed -> blocks -> final norm -> head."""

from __future__ import annotations

import torch

from emergence.core.models.hooks import HookedModel
from emergence.core.models.prefix import prepend, token_loss


class TokenLM(HookedModel):
    """Subclasses set `config.n_ctx`, `embed`, `hook_embed`, `blocks`, `ln_final` and `lm_head`
    (and call prefix.add_prefix_input when config.d_prefix > 0)."""

    def readout(self, resid: torch.Tensor) -> torch.Tensor:
        """Logits (..., d_vocab) of a residual stream (..., d_model) read at any layer."""
        return self.lm_head(self.ln_final(resid))

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, prefix: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = prepend(self, self.hook_embed(self.embed(idx)), prefix)  # (B, T, d_model), T counting any prefix
        T = x.shape[1]
        if T > self.config.n_ctx:
            raise ValueError(f"sequence length {T} exceeds n_ctx {self.config.n_ctx}")
        for block in self.blocks:
            x = block(x)
        logits = self.readout(x)  # (B, T, d_vocab)
        if targets is None:
            return logits, None
        return logits, token_loss(logits, targets, T - idx.shape[1])
