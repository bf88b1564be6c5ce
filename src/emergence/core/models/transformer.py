"""GPT-2-style decoder-only Transformer (pre-LN) with TransformerLens-style hook points.

Attention runs through F.scaled_dot_product_attention unless someone listens
to that layer's `hook_pattern`; then it switches to an explicit softmax so the
probabilities exist as a (differentiable) tensor. Both paths compute the same
function.

Optional local token mixing (`conv_kernel` > 0): a causal depthwise
convolution over the last `conv_kernel` positions, added to the residual
stream at the start of every block (a "Canon layer", Allen-Zhu 2025, Physics
of Language Models 4.1). It hands each position its recent tokens directly,
which a plain GPT-2 must first learn as previous-token heads; the binding
default uses it to leave its lookup plateau within a CPU budget (docs/binding.md,
bench/binding_lookup.py). 0 = plain GPT-2.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from emergence.core.models.hooks import HookedModel, HookPoint, fp32_or_wider
from emergence.core.models.prefix import add_prefix_input, prepend, token_loss
from emergence.core.models.registry import register
from emergence.core.models.transformer_config import TransformerConfig

Rope = tuple[torch.Tensor, torch.Tensor]  # cos, sin: each (T, 1, d_head / 2)
ACT_MODULES = {"gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"), "relu": nn.ReLU}


def rope_tables(n_ctx: int, d_head: int, base: float) -> Rope:
    inv_freq = base ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)  # (d_head / 2,)
    angles = torch.outer(torch.arange(n_ctx, dtype=torch.float32), inv_freq)  # (n_ctx, d_head / 2)
    return angles.cos()[:, None, :], angles.sin()[:, None, :]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (B, T, H, d_head) by position; GPT-NeoX half-split pairing."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class LayerNorm(nn.Module):
    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        # (B, T, d_model): centred and scaled, before the gain and bias, as TransformerLens 4's
        # NormalizationBridge takes it (its hook_out is the affine output: here, the module's output)
        self.hook_normalized = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.hook_normalized.has_hooks:  # nobody listens: one fused kernel, the same function
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)
        return self.hook_normalized(F.layer_norm(x, self.weight.shape, eps=1e-5)) * self.weight + self.bias


class Attention(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.n_heads, self.d_head, self.dropout = cfg.n_heads, cfg.d_head, cfg.dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.n_heads * cfg.d_head)  # fused: one GEMM
        self.out = nn.Linear(cfg.n_heads * cfg.d_head, cfg.d_model)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()  # (B, T, H, d_head)
        # q and k after RoPE: TransformerLens's names (its hook_q and hook_k are taken before the rotation)
        self.hook_rot_q, self.hook_rot_k = HookPoint(), HookPoint()  # (B, T, H, d_head)
        self.hook_pattern = HookPoint()  # (B, H, Tq, Tk), post-softmax
        self.hook_z = HookPoint()  # (B, T, H, d_head), per-head output before `out`

    def forward(self, x: torch.Tensor, rope: Rope | None) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.d_head).unbind(2)  # each (B, T, H, d_head)
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        if rope is not None:
            q, k = self.hook_rot_q(apply_rope(q, *rope)), self.hook_rot_k(apply_rope(k, *rope))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # each (B, H, T, d_head)
        p = self.dropout if self.training else 0.0
        if self.hook_pattern.has_hooks:
            z = self._explicit_attention(q, k, v, p)
        else:
            z = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, H, T, d_head)
        z = self.hook_z(z.transpose(1, 2))  # (B, T, H, d_head)
        return self.out(z.reshape(B, T, -1))

    def _explicit_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: float) -> torch.Tensor:
        T = q.shape[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        pattern = self.hook_pattern(
            scores.masked_fill(~causal, float("-inf")).softmax(dim=-1, dtype=fp32_or_wider(scores.dtype))
        )
        return F.dropout(pattern, p, self.training) @ v  # (B, H, T, d_head)


class CausalConv(nn.Module):
    """Depthwise conv mixing each position with the `kernel - 1` before it (never later ones)."""

    def __init__(self, d_model: int, kernel: int) -> None:
        super().__init__()
        self.kernel = kernel
        self.conv = nn.Conv1d(d_model, d_model, kernel, groups=d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.pad(x.transpose(1, 2), (self.kernel - 1, 0))  # (B, d_model, k - 1 + T): left pad only
        return self.conv(h).transpose(1, 2)  # (B, T, d_model)


class MLP(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.fc_in = nn.Linear(cfg.d_model, cfg.d_mlp)
        self.act = ACT_MODULES[cfg.act]()
        self.fc_out = nn.Linear(cfg.d_mlp, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(self.act(self.fc_in(x)))


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.conv = CausalConv(cfg.d_model, cfg.conv_kernel) if cfg.conv_kernel else None
        self.ln1, self.attn = LayerNorm(cfg.d_model), Attention(cfg)
        self.ln2, self.mlp = LayerNorm(cfg.d_model), MLP(cfg)
        self.drop = nn.Dropout(cfg.dropout)
        # All (B, T, d_model); resid_mid = resid_pre (+ conv_out) + attn_out, resid_post = resid_mid + mlp_out.
        self.hook_resid_pre, self.hook_resid_mid, self.hook_resid_post = HookPoint(), HookPoint(), HookPoint()
        self.hook_attn_out, self.hook_mlp_out = HookPoint(), HookPoint()
        if self.conv is not None:
            self.hook_conv_out = HookPoint()

    def forward(self, x: torch.Tensor, rope: Rope | None) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        if self.conv is not None:
            x = x + self.hook_conv_out(self.conv(x))
        x = self.hook_resid_mid(x + self.hook_attn_out(self.drop(self.attn(self.ln1(x), rope))))
        return self.hook_resid_post(x + self.hook_mlp_out(self.drop(self.mlp(self.ln2(x)))))


@register("transformer", TransformerConfig)
class Transformer(HookedModel):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        self.embed = nn.Embedding(config.d_vocab, config.d_model)
        self.hook_embed = HookPoint()  # (B, T, d_model)
        if config.pos == "learned":
            self.pos_embed = nn.Embedding(config.n_ctx, config.d_model)
            self.hook_pos_embed = HookPoint()  # (B, T, d_model)
        else:
            # Derived from the config, so kept out of the state dict.
            cos, sin = rope_tables(config.n_ctx, config.d_head, config.rope_base)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_final = LayerNorm(config.d_model)
        self.unembed = nn.Linear(config.d_model, config.d_vocab, bias=False)
        if config.tie_embeddings:
            self.unembed.weight = self.embed.weight
        add_prefix_input(self, config.d_prefix, config.d_model)
        self._init_weights()
        self._setup_hook_points()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, (nn.Linear, nn.Conv1d)) and m.bias is not None:
                nn.init.zeros_(m.bias)  # a conv's default bias (~0.3) would swamp the 0.02-scale embeddings
        # GPT-2: projections that write into the residual stream shrink with depth.
        resid_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for block in self.blocks:
            nn.init.normal_(block.attn.out.weight, std=resid_std)
            nn.init.normal_(block.mlp.fc_out.weight, std=resid_std)

    def readout(self, resid: torch.Tensor) -> torch.Tensor:
        """Logits (..., d_vocab) of a residual stream (..., d_model) read at any layer (every zoo LM has it)."""
        return self.unembed(self.ln_final(resid))

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, prefix: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = prepend(self, self.hook_embed(self.embed(idx)), prefix)  # (B, T, d_model), T counting any prefix
        B, T, _ = x.shape
        if T > self.config.n_ctx:
            raise ValueError(f"sequence length {T} exceeds n_ctx {self.config.n_ctx}")
        rope = None
        if self.config.pos == "learned":
            pos = self.pos_embed(torch.arange(T, device=idx.device)).expand(B, T, -1)  # (B, T, d_model)
            x = x + self.hook_pos_embed(pos)
        else:
            rope = (self.rope_cos[:T], self.rope_sin[:T])
        x = self.drop(x)
        for block in self.blocks:
            x = block(x, rope)
        logits = self.readout(x)  # (B, T, d_vocab)
        if targets is None:
            return logits, None
        return logits, token_loss(logits, targets, T - idx.shape[1])
