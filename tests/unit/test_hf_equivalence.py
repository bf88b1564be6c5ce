"""Our models against the Hugging Face modules of the same function, weight for weight (models/hf.py):
GPT-2 with learned positions is GPT2LMHeadModel, GPT-2 with RoPE is GPTNeoXForCausalLM, our Mamba-2
is Mamba2ForCausalLM. Each in every activation and with tied and untied embeddings, on random weights
(our init, then every tensor perturbed, so no zero bias or unit gain hides a misplaced one) and random
sequences: max logit difference <= 1e-5."""

from __future__ import annotations

import pytest
import torch
from refusals import refuses, refuses_key

from emergence.core.models.hf import to_hf
from emergence.core.models.registry import build_model

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
    hf = to_hf(ours)
    assert type(hf).__name__ == hf_class
    # tied weights give equal logits either way: the tie itself is checked
    assert (hf.get_output_embeddings().weight is hf.get_input_embeddings().weight) == tie
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
    "arch, config, named",
    [
        ("transformer", {**TINY, "conv_kernel": 3}, ["transformer", "Canon"]),
        ("transformer", {**TINY, "d_prefix": 5}, ["transformer", "prefix"]),
        ("transformer", {**TINY, "d_head": 16}, ["n_heads x d_head = 64", "d_model 32"]),
        ("lstm", dict(n_layers=1, d_model=16, d_vocab=VOCAB, n_ctx=16), ["LSTM"]),
    ],
)
def test_no_counterpart_is_refused_in_one_line(arch, config, named):
    with refuses(*named):
        to_hf(build_model(arch, config))


MAMBA = dict(n_layers=2, d_model=32, d_vocab=VOCAB, n_ctx=16, d_state=8, head_dim=8)


def test_mamba_ssm_init_changes_exactly_the_three_rules_it_names():
    # Same seed, both inits: HF draws everything first, the mamba_ssm rules then redraw A, in_proj and
    # conv1d only (models/mamba2.py quotes mamba_ssm 2.3.2's source for each).
    torch.manual_seed(0)
    hf_init = build_model("mamba2", dict(MAMBA))
    torch.manual_seed(0)
    ref = build_model("mamba2", {**MAMBA, "init": "mamba_ssm"})
    a, b = hf_init.state_dict(), ref.state_dict()
    differ = {k.split("mixer.", 1)[-1] for k in a if not torch.equal(a[k], b[k])}
    assert differ == {"A_log", "in_proj.weight", "conv1d.weight", "conv1d.bias"}
    H, d_in = 2 * 32 // 8, 32  # expand * d_model / head_dim heads
    for layer in ref.blocks:
        m = layer.mamba.mixer
        A = m.A_log.exp()
        assert A.shape == (H,) and (A >= 1).all() and (A <= 16).all()
        assert not torch.allclose(A, torch.arange(1.0, H + 1))  # HF's 1..H
        bound = 1 / d_in**0.5  # kaiming_uniform(a=sqrt(5)) on fan_in d_model
        assert m.in_proj.weight.abs().max() <= bound and m.in_proj.weight.std() > 0.8 * bound / 3**0.5
        assert m.conv1d.bias.abs().max() <= 1 / m.conv1d.kernel_size[0] ** 0.5 and m.conv1d.bias.abs().min() > 0
    A = torch.cat([layer.mamba.mixer.A_log.exp() for layer in ref.blocks])  # 16 draws of U(1, 16)
    assert A.min() < 4 and A.max() > 12  # the whole range is drawn from, not a part of it
    for layer in hf_init.blocks:
        assert torch.allclose(layer.mamba.mixer.A_log.exp(), torch.arange(1.0, H + 1))
        assert torch.equal(layer.mamba.mixer.conv1d.bias, torch.zeros_like(layer.mamba.mixer.conv1d.bias))


def test_mamba_init_must_be_named():
    with refuses_key("model.init", "'ssm'", "hf or mamba_ssm"):
        build_model("mamba2", {**MAMBA, "init": "ssm"})
