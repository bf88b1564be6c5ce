"""Mamba-2 language model with TransformerLens-style hook points, built from HF modules.

The layers are the Hugging Face `transformers` Mamba-2 blocks (random init,
nothing downloaded), but the forward pass is ours: embedding -> each block
between `blocks.{L}.hook_resid_pre` and `blocks.{L}.hook_resid_post` ->
final RMSNorm -> LM head, so hooks can read and replace the residual stream
exactly as on the Transformer. A Mamba2Block is pre-norm and residual
(x + mixer(norm(x))), so the hooked tensor is a true residual stream.

With `mamba-ssm` and `causal-conv1d` installed (CUDA only) HF dispatches the
blocks to fused kernels by itself; on CPU its PyTorch reference path runs.
mamba-ssm without causal-conv1d: the unfused scan (see below).
The chunked scan is an exact rewrite of the recurrence, so `chunk_size` only
trades speed for memory: 64 was the fastest on the CPU here (d_model 128,
sequence 256); mamba_ssm and HF default to 256.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING

import torch
import torch.nn as nn

from emergence.core.models.hooks import HookPoint
from emergence.core.models.mamba2_config import Mamba2Config
from emergence.core.models.prefix import add_prefix_input
from emergence.core.models.registry import register
from emergence.core.models.token_lm import TokenLM

if TYPE_CHECKING:
    import transformers


def hf_config(cfg: Mamba2Config) -> transformers.Mamba2Config:
    """The `transformers.Mamba2Config` of our config (num_heads * head_dim == expand * d_model)."""
    from transformers import Mamba2Config as HFMamba2Config  # lazy: see _hf_model

    return HFMamba2Config(
        vocab_size=cfg.d_vocab,
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        state_size=cfg.d_state,
        head_dim=cfg.head_dim,
        num_heads=cfg.n_heads,
        expand=cfg.expand,
        conv_kernel=cfg.conv_kernel,
        n_groups=cfg.n_groups,
        chunk_size=cfg.chunk_size,
        # std 0.02 for embeddings, lm_head and in_proj (HF defaults to 0.1) and out_proj shrunk by
        # 1/sqrt(n_layers), as mamba_ssm's LM and GPT-2 do; what else differs: mamba_ssm_init.
        initializer_range=0.02,
        rescale_prenorm_residual=True,
        use_cache=False,
        tie_word_embeddings=False,
        pad_token_id=None,
        bos_token_id=None,
        eos_token_id=None,  # no special tokens in a small vocab
    )


def mamba_ssm_init(mixer: nn.Module) -> None:
    """Where HF's Mamba-2 init departs from mamba_ssm 2.3.2's (modules/mamba2.py, Mamba2.__init__, and
    models/mixer_seq_simple.py, _init_weights), mamba_ssm's rule:
    - `A = torch.empty(nheads).uniform_(*A_init_range)` with A_init_range=(1, 16); A_log = log(A)
      (HF: A = 1..nheads);
    - in_proj: nn.Linear's own init, kaiming_uniform(a=sqrt(5)), and no bias (HF: normal, std 0.02);
    - conv1d: nn.Conv1d's own init, weight and bias ("conv_init" None) (HF: kaiming weight, zero bias).
    The rest is the same in both: dt_bias the inverse softplus of dt ~ exp(U[log 1e-3, log 0.1])
    floored at 1e-4, D = 1, out_proj kaiming_uniform / sqrt(n_layers), embeddings normal 0.02 (mamba_ssm
    ties lm_head to them; ours is untied, drawn alike), norms 1."""
    with torch.no_grad():
        mixer.A_log.copy_(torch.empty(mixer.num_heads).uniform_(1, 16).log())
        mixer.in_proj.reset_parameters()
        if mixer.in_proj.bias is not None:
            nn.init.zeros_(mixer.in_proj.bias)  # _init_weights zeroes every Linear bias
        mixer.conv1d.reset_parameters()


# Without CUDA the PyTorch path is the only one that can exist (mamba-ssm cannot even be
# installed), so HF's "install mamba_ssm" advice is noise there. On a GPU machine it stays.
_FALLBACK_LOGGER = logging.getLogger("transformers.integrations.hub_kernels")


def _drop_cpu_fallback_warning(record: logging.LogRecord) -> bool:
    return "is falling back to its reference PyTorch implementation" not in record.getMessage()


def _hf_model(cfg: Mamba2Config) -> nn.Module:
    # Imported here, not at module level: the registry imports every model module for every
    # build, and `transformers` adds seconds to each stage that never builds a Mamba-2.
    from transformers import Mamba2ForCausalLM

    if not torch.cuda.is_available():
        _FALLBACK_LOGGER.addFilter(_drop_cpu_fallback_warning)  # idempotent: same filter object
    _no_fused_scan_without_causal_conv1d()
    return Mamba2ForCausalLM(hf_config(cfg))


def _no_fused_scan_without_causal_conv1d() -> None:
    """mamba_ssm's fused training scan (mamba_split_conv1d_scan_combined) calls causal_conv1d's CUDA
    function, None when causal_conv1d does not import, yet HF dispatches to it whenever mamba_ssm
    imports: the first training step would fail ("'NoneType' object is not callable", seen on an H200).
    Then the scan entry point becomes HF's torch function (it returns None, so the mixer runs its
    unfused path: torch conv + mamba_ssm's chunked scan), and one line says so."""
    from transformers.models.mamba2 import modeling_mamba2

    paths, name = kernel_paths(), KERNEL_ENTRY_POINTS["scan"]
    if paths["mamba2.scan"] == "fused" and paths["mamba2.conv1d"] == "torch":
        setattr(modeling_mamba2, name, getattr(modeling_mamba2, name).__wrapped__)
        logging.getLogger(__name__).warning(
            "mamba_ssm imports but causal_conv1d does not: Mamba-2 training runs the unfused scan "
            "(torch conv, mamba_ssm chunked scan); install causal-conv1d for the fused one (docs/gpu.md)"
        )


# HF wraps each kernel entry point at import: mamba_ssm's / causal_conv1d's function when the
# package imports (the `.[gpu]` extra), else its own torch function; the wrapper's closure says which.
KERNEL_ENTRY_POINTS = {
    "scan": "mamba2_split_conv1d_scan_combined",  # training: conv + chunked scan + norm + out_proj, fused
    "chunk_scan": "mamba2_chunk_scan",  # the chunked scan alone (eval and hooks)
    "conv1d": "causal_conv1d_fn",
}


def kernel_paths() -> dict[str, str]:
    """{entry point: "fused", "torch" or "unknown"}: what HF's Mamba-2 mixer dispatches to in this
    process ("unknown": a transformers release that wraps its kernels otherwise than 5.23 does)."""
    from transformers.models.mamba2 import modeling_mamba2

    paths = {}
    for key, name in KERNEL_ENTRY_POINTS.items():
        fn = getattr(modeling_mamba2, name)
        held = inspect.getclosurevars(fn).nonlocals
        if "implementation" in held and "torch_function" in held:
            paths[f"mamba2.{key}"] = "torch" if held["implementation"] is held["torch_function"] else "fused"
        elif fn.__module__ == modeling_mamba2.__name__ and not hasattr(fn, "__wrapped__"):
            paths[f"mamba2.{key}"] = "torch"  # HF's own function, unwrapped (the guard above set it)
        else:
            paths[f"mamba2.{key}"] = "unknown"
    return paths


class HookedNorm(nn.Module):
    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.norm = norm
        self.hook_normalized = HookPoint()  # (B, T, d_model), before the gain, as TransformerLens 4's

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.hook_normalized.has_hooks:
            return self.norm(x)
        # HF's Mamba2RMSNorm, step by step: in float32, x / rms(x), then the gain in x's dtype
        scaled = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.norm.variance_epsilon)
        return self.norm.weight * self.hook_normalized(scaled).to(x.dtype)


class Mamba2Layer(nn.Module):
    """One HF Mamba2Block (x + mixer(rmsnorm(x))) between the residual-stream hook points."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.mamba = block
        self.hook_resid_pre, self.hook_resid_post = HookPoint(), HookPoint()  # (B, T, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hook_resid_post(self.mamba(self.hook_resid_pre(x)))


@register("mamba2", Mamba2Config)
class Mamba2(TokenLM):
    def __init__(self, config: Mamba2Config) -> None:
        super().__init__()
        config.validate()
        self.config = config
        hf = _hf_model(config)
        # Keep HF's modules, drop its shell: our forward is the one that runs the hooks.
        self.embed = hf.backbone.embeddings
        self.hook_embed = HookPoint()  # (B, T, d_model)
        self.blocks = nn.ModuleList(Mamba2Layer(block) for block in hf.backbone.layers)
        self.ln_final = HookedNorm(hf.backbone.norm_f)
        self.lm_head = hf.lm_head
        if config.init == "mamba_ssm":
            for layer in self.blocks:
                mamba_ssm_init(layer.mamba.mixer)
        add_prefix_input(self, config.d_prefix, config.d_model)
        self._setup_hook_points()

    def kernels(self) -> dict[str, str]:
        """Which implementation each fused entry point runs (the training loop records it)."""
        return kernel_paths()
