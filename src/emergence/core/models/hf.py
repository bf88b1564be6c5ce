"""Our models as the Hugging Face modules that compute the same function, weight for weight.

- Transformer, learned positions -> `GPT2LMHeadModel` (GPT-2 is this model: pre-LN, fused qkv,
  learned positions, LayerNorm eps 1e-5, 1/sqrt(d_head) attention).
- Transformer, RoPE -> `GPTNeoXForCausalLM` with sequential residuals (`use_parallel_residual:
  false`), rotary on the whole head (`partial_rotary_factor: 1`) in NeoX's half-split pairing, as ours.
- Mamba-2 -> `Mamba2ForCausalLM`: our layers are HF's blocks, so only the shell differs.

The activation maps to the HF name of the same function: gelu -> "gelu" (erf), gelu_tanh ->
"gelu_new" (GPT-2's own tanh approximation), relu -> "relu". A model with no exact counterpart is
refused with one line: the causal-conv (Canon) layer, an environment prefix, heads that do not
tile d_model (GPT-2 and NeoX split d_model into heads), the LSTM and the attention-only model.
tests/unit/test_hf_equivalence.py holds every mapping to a max logit difference of 1e-5.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn

from emergence.core.io import PipelineError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

HF_ACT = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}


def to_hf(model: nn.Module) -> PreTrainedModel:
    """The HF model computing `model`'s function, with `model`'s weights (copies), in eval mode."""
    from emergence.core.models.mamba2 import Mamba2
    from emergence.core.models.transformer import Transformer

    if isinstance(model, Mamba2):
        return _mamba2(model).eval()
    if not isinstance(model, Transformer):
        raise PipelineError(f"{type(model).__name__}: no Hugging Face model computes it (Transformer and Mamba-2 only)")
    c = model.config
    if c.conv_kernel or c.d_prefix:
        what = "a causal-conv (Canon) layer" if c.conv_kernel else "an environment-feature prefix"
        raise PipelineError(f"transformer with {what}: no Hugging Face model computes it")
    if c.n_heads * c.d_head != c.d_model:
        raise PipelineError(
            f"transformer with n_heads x d_head = {c.n_heads * c.d_head} != d_model {c.d_model}: GPT-2 and "
            "GPT-NeoX split d_model into heads"
        )
    return (_gpt2(model) if c.pos == "learned" else _neox(model)).eval()


def _gpt2(model: nn.Module) -> PreTrainedModel:
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    hf = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=c.d_vocab,
            n_positions=c.n_ctx,
            n_embd=c.d_model,
            n_layer=c.n_layers,
            n_head=c.n_heads,
            n_inner=c.d_mlp,
            activation_function=HF_ACT[c.act],
            resid_pdrop=c.dropout,
            embd_pdrop=c.dropout,
            attn_pdrop=c.dropout,
            layer_norm_epsilon=1e-5,
            tie_word_embeddings=c.tie_embeddings,
            bos_token_id=None,
            eos_token_id=None,
        )  # fmt: skip
    )
    sd = {"transformer.wte.weight": model.embed.weight, "transformer.wpe.weight": model.pos_embed.weight}
    for i, b in enumerate(model.blocks):
        p = f"transformer.h.{i}."
        sd |= _norm(p + "ln_1", b.ln1) | _norm(p + "ln_2", b.ln2)
        # GPT-2's Conv1D holds (in, out): our Linear's weight transposed; q, k, v split alike (3, H, d_head)
        for name, lin in (("attn.c_attn", b.attn.qkv), ("attn.c_proj", b.attn.out),
                          ("mlp.c_fc", b.mlp.fc_in), ("mlp.c_proj", b.mlp.fc_out)):  # fmt: skip
            sd |= {p + name + ".weight": lin.weight.T, p + name + ".bias": lin.bias}
    sd |= _norm("transformer.ln_f", model.ln_final) | {"lm_head.weight": model.unembed.weight}
    return _loaded(hf, sd)


def _neox(model: nn.Module) -> PreTrainedModel:
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    c = model.config
    hf = GPTNeoXForCausalLM(
        GPTNeoXConfig(
            vocab_size=c.d_vocab,
            hidden_size=c.d_model,
            num_hidden_layers=c.n_layers,
            num_attention_heads=c.n_heads,
            intermediate_size=c.d_mlp,
            hidden_act=HF_ACT[c.act],
            rope_parameters={"rope_type": "default", "rope_theta": c.rope_base, "partial_rotary_factor": 1.0},
            max_position_embeddings=c.n_ctx,
            layer_norm_eps=1e-5,
            use_parallel_residual=False,
            attention_dropout=c.dropout,
            hidden_dropout=c.dropout,
            tie_word_embeddings=c.tie_embeddings,
            attention_bias=True,
            bos_token_id=None,
            eos_token_id=None,
        )  # fmt: skip
    )
    H, d = c.n_heads, c.d_head

    def per_head(t: torch.Tensor) -> torch.Tensor:  # ours (3, H, d_head, ...) -> NeoX's (H, 3, d_head, ...)
        return t.reshape(3, H, d, *t.shape[1:]).transpose(0, 1).reshape(t.shape)

    sd = {"gpt_neox.embed_in.weight": model.embed.weight}
    for i, b in enumerate(model.blocks):
        p = f"gpt_neox.layers.{i}."
        sd |= _norm(p + "input_layernorm", b.ln1) | _norm(p + "post_attention_layernorm", b.ln2)
        sd |= {p + "attention.query_key_value.weight": per_head(b.attn.qkv.weight),
               p + "attention.query_key_value.bias": per_head(b.attn.qkv.bias)}  # fmt: skip
        for name, lin in (("attention.dense", b.attn.out), ("mlp.dense_h_to_4h", b.mlp.fc_in),
                          ("mlp.dense_4h_to_h", b.mlp.fc_out)):  # fmt: skip
            sd |= {p + name + ".weight": lin.weight, p + name + ".bias": lin.bias}
    sd |= _norm("gpt_neox.final_layer_norm", model.ln_final) | {"lm_head.weight": model.unembed.weight}
    return _loaded(hf, sd)


def _mamba2(model: nn.Module) -> PreTrainedModel:
    from transformers import Mamba2ForCausalLM

    from emergence.core.models.mamba2 import hf_config

    if model.config.d_prefix:
        raise PipelineError("mamba2 with an environment-feature prefix: no Hugging Face model computes it")
    hf = Mamba2ForCausalLM(hf_config(model.config))
    sd = {"backbone.embeddings.weight": model.embed.weight, "lm_head.weight": model.lm_head.weight}
    for i, layer in enumerate(model.blocks):
        sd |= {f"backbone.layers.{i}.{k}": v for k, v in layer.mamba.state_dict().items()}
    sd |= {f"backbone.norm_f.{k}": v for k, v in model.ln_final.norm.state_dict().items()}
    return _loaded(hf, sd)


def _norm(prefix: str, ln: nn.Module) -> dict[str, torch.Tensor]:
    return {prefix + ".weight": ln.weight, prefix + ".bias": ln.bias}


def _loaded(hf: PreTrainedModel, sd: dict[str, torch.Tensor]) -> PreTrainedModel:
    """`sd` into `hf`, strictly: every HF tensor given (a tied head counted once), none left over."""
    tied = {"lm_head.weight"} if hf.config.tie_word_embeddings else set()
    missing, unexpected = hf.load_state_dict({k: v.detach().clone() for k, v in sd.items()}, strict=False)
    if set(missing) - tied or unexpected:
        raise RuntimeError(f"HF mapping of {type(hf).__name__}: missing {missing}, unexpected {unexpected}")
    return hf
