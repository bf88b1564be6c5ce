"""Tiny models shared by the tests: a zoo-registered MLP for the training loop,
and small Transformers for the analyses."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from emergence.core.models.registry import build_model, register
from emergence.studies.binding.tokenizer import CharTokenizer

TOK = CharTokenizer()
N_LAYERS = 2


@dataclass
class TinyCfg:
    vocab: int = 8
    d: int = 16
    dropout: float = 0.0
    tie: bool = False


@register("tiny_mlp_test", TinyCfg)
class TinyModel(nn.Module):
    """embedding -> dropout -> layernorm -> linear: enough to learn a token map."""

    def __init__(self, config: TinyCfg):
        super().__init__()
        self.config = config
        self.emb = nn.Embedding(config.vocab, config.d)
        self.drop = nn.Dropout(config.dropout)
        self.ln = nn.LayerNorm(config.d)
        self.head = nn.Linear(config.d, config.vocab)
        if config.tie:
            self.head.weight = self.emb.weight

    def forward(self, idx, targets=None):
        logits = self.head(self.ln(self.drop(self.emb(idx))))  # (B, T, vocab)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)


def tiny(seed: int = 0, **config) -> TinyModel:
    torch.manual_seed(seed)
    return build_model("tiny_mlp_test", config)


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(
        "transformer", dict(n_layers=N_LAYERS, d_model=32, n_heads=2, d_head=16, d_mlp=64, n_ctx=80, d_vocab=len(TOK))
    ).eval()


def digit_reader() -> torch.nn.Module:
    """A random model whose answer depends on the program's digits: only digits are embedded
    and only digits can be predicted, so about half the counterfactual pairs change its answer."""
    model = tiny_model()
    other = torch.ones(len(TOK), dtype=torch.bool)
    other[TOK.digit_ids] = False
    with torch.no_grad():
        model.embed.weight[other] = 0.0
        model.unembed.weight[other] = 0.0
    return model


def no_hooks(model) -> bool:
    return not any(point.has_hooks for point in model.hook_points().values())


class LastEnvLookup(nn.Module):
    """Predicts from the most recent environment token: the logits at position t are
    `table[x]`, x the last token at or before t among `env_ids` (`table[0]` before any).

    With rows of log-probabilities, -ln p(w | context) is -table[u, w], u the context's last
    environment token, so a test can write its surprisals down. Causal: right padding after a
    context cannot change the prediction at its last token.
    """

    def __init__(self, table: torch.Tensor, env_ids: list[int]):
        super().__init__()
        self.table = nn.Parameter(table)
        self.register_buffer("env_ids", torch.tensor(env_ids, dtype=torch.long))

    def forward(self, idx, targets=None):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device).expand(B, T)
        last = torch.where(torch.isin(idx, self.env_ids), pos, -1).cummax(dim=1).values  # (B, T)
        source = torch.where(last >= 0, idx.gather(1, last.clamp(min=0)), 0)  # (B, T)
        return self.table[source], None  # (B, T, V)
