"""Unidirectional stacked LSTM language model with TransformerLens-style hook points.

embedding -> n_layers single-layer `nn.LSTM`s -> final LayerNorm -> linear head.
Each layer is its own module so its output sequence is hookable:
`blocks.{L}.hook_resid_pre` / `hook_resid_post` are the hidden-state sequences
entering and leaving LSTM layer L (the names are shared with the Transformer
so analyses address every architecture alike; post of L is pre of L + 1).

There is deliberately no residual connection: this is the plain stacked LSTM
that recurrent baselines use, and decoding an intermediate layer does not need
one, since the tuned lens learns a per-layer map into the last layer's basis.
Expect the raw logit lens (`unembed` of an early layer) to be weak here.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from emergence.core.models.hooks import HookPoint
from emergence.core.models.lstm_config import LSTMConfig
from emergence.core.models.prefix import add_prefix_input
from emergence.core.models.registry import register
from emergence.core.models.token_lm import TokenLM
from emergence.core.models.transformer import LayerNorm


class LSTMLayer(nn.Module):
    def __init__(self, cfg: LSTMConfig) -> None:
        super().__init__()
        # Dropout on the layer's input (as nn.LSTM(dropout=...) does between layers), so the
        # hooked output of layer L is exactly the hooked input of layer L + 1.
        self.drop = nn.Dropout(cfg.dropout)
        self.lstm = nn.LSTM(cfg.d_model, cfg.d_model, batch_first=True)
        self.hook_resid_pre, self.hook_resid_post = HookPoint(), HookPoint()  # (B, T, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.drop(self.hook_resid_pre(x)))  # (B, T, d_model); final (h, c) unused
        return self.hook_resid_post(h)


@register("lstm", LSTMConfig)
class LSTM(TokenLM):
    def __init__(self, config: LSTMConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        self.embed = nn.Embedding(config.d_vocab, config.d_model)
        self.hook_embed = HookPoint()  # (B, T, d_model)
        self.blocks = nn.ModuleList(LSTMLayer(config) for _ in range(config.n_layers))
        self.ln_final = LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.d_vocab, bias=False)
        add_prefix_input(self, config.d_prefix, config.d_model)
        self._init_weights()
        self._setup_hook_points()

    def _init_weights(self) -> None:
        # PyTorch's LSTM and embedding defaults, plus two changes: forget-gate bias 1
        # (Jozefowicz et al. 2015) so memory is kept by default early in training, and a
        # small head (as in the Transformer) so every architecture starts near loss ln(V).
        d = self.config.d_model
        for block in self.blocks:
            with torch.no_grad():  # gate order in nn.LSTM: input, forget, cell, output
                block.lstm.bias_ih_l0[d : 2 * d].fill_(1.0)
                block.lstm.bias_hh_l0[d : 2 * d].zero_()
        nn.init.normal_(self.lm_head.weight, std=0.02)
