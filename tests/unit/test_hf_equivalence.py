"""Our models against the Hugging Face modules of the same function, weight for weight (models/hf.py):
GPT-2 with learned positions is GPT2LMHeadModel, GPT-2 with RoPE is GPTNeoXForCausalLM, our Mamba-2
is Mamba2ForCausalLM. Each in every activation and with tied and untied embeddings, on random weights
(our init, then every tensor perturbed, so no zero bias or unit gain hides a misplaced one) and random
sequences: max logit difference <= 1e-5."""

from __future__ import annotations

import re

import pytest
import torch

from emergence.core.io import PipelineError
from emergence.core.models import build_model
from emergence.core.models.hf import to_hf

VOCAB, T = 37, 12
TINY = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, d_mlp=48, n_ctx=16, d_vocab=VOCAB)


def perturbed(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():  # gains off 1, biases off 0, each tensor its own noise
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model.eval()


def max_logit_diff(ours: torch.nn.Module, seed: int) -> float:
    hf = to_hf(ours)
    idx = torch.randint(VOCAB, (3, T), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return (ours(idx)[0] - hf(input_ids=idx).logits).abs().max().item()


@pytest.mark.parametrize("pos, hf_class", [("learned", "GPT2LMHeadModel"), ("rope", "GPTNeoXForCausalLM")])
@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "relu"])
@pytest.mark.parametrize("tie", [False, True])
def test_transformer_equals_its_hf_module(pos, hf_class, act, tie):
    ours = perturbed(build_model("transformer", {**TINY, "pos": pos, "act": act, "tie_embeddings": tie}), 1)
    assert type(to_hf(ours)).__name__ == hf_class
    assert max_logit_diff(ours, 2) <= 1e-5


def test_rope_base_reaches_neox():
    ours = perturbed(build_model("transformer", {**TINY, "pos": "rope", "rope_base": 37.0}), 3)
    assert max_logit_diff(ours, 4) <= 1e-5


def test_a_wrong_activation_is_seen():
    # the tolerance tells GPT-2's tanh GELU from the exact one: the check can fail
    ours = perturbed(build_model("transformer", {**TINY, "pos": "learned", "act": "gelu"}), 5)
    hf = to_hf(ours)
    hf.config.activation_function = "gelu_new"
    for block in hf.transformer.h:
        from transformers.activations import ACT2FN

        block.mlp.act = ACT2FN["gelu_new"]
    idx = torch.randint(VOCAB, (3, T), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert (ours(idx)[0] - hf(input_ids=idx).logits).abs().max().item() > 1e-5


def test_mamba2_equals_mamba2_for_causal_lm():
    ours = perturbed(
        build_model("mamba2", dict(n_layers=2, d_model=32, d_vocab=VOCAB, n_ctx=16, d_state=8, head_dim=16)), 7
    )
    assert type(to_hf(ours)).__name__ == "Mamba2ForCausalLM"
    assert max_logit_diff(ours, 8) <= 1e-5


@pytest.mark.parametrize(
    "arch, config, says",
    [
        ("transformer", {**TINY, "conv_kernel": 3}, "causal-conv (Canon) layer"),
        ("transformer", {**TINY, "d_prefix": 5}, "environment-feature prefix"),
        ("transformer", {**TINY, "d_head": 16}, "n_heads x d_head = 64 != d_model 32"),
        ("lstm", dict(n_layers=1, d_model=16, d_vocab=VOCAB, n_ctx=16), "LSTM"),
    ],
)
def test_no_counterpart_is_refused_in_one_line(arch, config, says):
    with pytest.raises(PipelineError, match=re.escape(says)) as e:
        to_hf(build_model(arch, config))
    assert "\n" not in str(e.value)
