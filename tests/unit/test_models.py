"""Transformer: shapes, loss masking, causality, both position schemes, both attention paths, registry, config."""

import pytest
import torch
from refusals import refuses, refuses_key

from emergence.core.models.registry import build_model, model_spec
from emergence.core.models.transformer import Transformer, apply_rope, rope_tables
from emergence.core.models.transformer_config import TransformerConfig

TINY = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, d_mlp=64, n_ctx=16, d_vocab=11)


def tiny(**overrides) -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig(**{**TINY, **overrides})).eval()


def tokens(B: int = 3, T: int = 10, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, TINY["d_vocab"], (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_forward_shapes_and_loss(pos):
    model, idx = tiny(pos=pos), tokens()
    logits, loss = model(idx)
    assert logits.shape == (3, 10, TINY["d_vocab"]) and loss is None
    _, loss = model(idx, idx)
    assert loss.ndim == 0 and torch.isfinite(loss)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_loss_ignores_minus_one_targets():
    model, idx = tiny(), tokens()
    logits, _ = model(idx)
    targets = idx.clone()
    targets[:, :7] = -1
    _, loss = model(idx, targets)
    expected = torch.nn.functional.cross_entropy(logits[:, 7:].flatten(0, 1), idx[:, 7:].flatten())
    torch.testing.assert_close(loss, expected)


@pytest.mark.parametrize("pos, conv", [("rope", 0), ("learned", 0), ("learned", 3)])
def test_causal(pos, conv):
    model, idx = tiny(pos=pos, conv_kernel=conv), tokens()
    changed = idx.clone()
    changed[:, 6] = (changed[:, 6] + 1) % TINY["d_vocab"]
    a, b = model(idx)[0], model(changed)[0]
    torch.testing.assert_close(a[:, :6], b[:, :6], rtol=0, atol=1e-6)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_conv_mixes_exactly_the_kernel_window():
    """conv_kernel=3 at layer 0: position t's conv output depends on tokens t-2..t only."""
    model, idx = tiny(conv_kernel=3), tokens()
    seen = {}
    with model.hooks([("blocks.0.hook_conv_out", lambda x, name: seen.setdefault("a", x))]):
        model(idx)
    changed = idx.clone()
    changed[:, 4] = (changed[:, 4] + 1) % TINY["d_vocab"]
    with model.hooks([("blocks.0.hook_conv_out", lambda x, name: seen.setdefault("b", x))]):
        model(changed)
    moved = (seen["a"] - seen["b"]).abs().amax(dim=(0, 2)) > 0  # (T,)
    assert moved.nonzero().flatten().tolist() == [4, 5, 6]
    assert "blocks.0.hook_conv_out" not in tiny().hook_points()  # only when enabled


def test_every_bias_starts_at_zero():
    """GPT-2 init. A conv's PyTorch default bias (~0.3) dwarfs the 0.02-scale embeddings and, after
    LayerNorm, drowns the token signal: it kept the binding lookup from forming (docs/binding.md)."""
    model = tiny(conv_kernel=4)
    biases = {name: p for name, p in model.named_parameters() if name.endswith("bias") and "ln" not in name}
    assert "blocks.0.conv.conv.bias" in biases
    assert all(torch.count_nonzero(p) == 0 for p in biases.values())


def test_residual_writers_start_smaller_with_depth():
    """GPT-2 init: weights std 0.02, except the two projections writing into the residual stream
    (attention out, MLP out), std 0.02 / sqrt(2 * n_layers)."""
    model = tiny(n_layers=3, d_model=64, d_head=16, d_mlp=256)
    resid = 0.02 / (2 * 3) ** 0.5
    for block in model.blocks:
        assert block.attn.out.weight.std().item() == pytest.approx(resid, rel=0.05)
        assert block.mlp.fc_out.weight.std().item() == pytest.approx(resid, rel=0.05)
        assert block.mlp.fc_in.weight.std().item() == pytest.approx(0.02, rel=0.05)
        assert block.attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_rope_and_learned_differ_in_parameters():
    assert "pos_embed.weight" in tiny(pos="learned").state_dict()
    rope = tiny(pos="rope")
    assert not any("pos_embed" in k or "rope" in k for k in rope.state_dict())  # tables are derived
    assert "hook_pos_embed" not in rope.hook_points()


def test_rope_is_a_relative_rotation():
    cos, sin = rope_tables(16, 8, 10000.0)
    q, k = torch.randn(1, 1, 2, 8).expand(1, 16, 2, 8), torch.randn(1, 1, 2, 8).expand(1, 16, 2, 8)
    rq, rk = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))
    # The same q, k vectors at positions (5, 2) and (8, 5) give the same score: only i - j matters.
    d1 = (rq[0, 5] * rk[0, 2]).sum(-1)
    d2 = (rq[0, 8] * rk[0, 5]).sum(-1)
    torch.testing.assert_close(d1, d2)


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_fast_and_explicit_attention_agree(pos):
    model, idx = tiny(pos=pos), tokens()
    fast = model(idx)[0]
    listen = [(lambda n: n.endswith("hook_pattern"), lambda t, n: None)]
    with model.hooks(listen):
        explicit = model(idx)[0]
    torch.testing.assert_close(fast, explicit, rtol=0, atol=1e-5)


def test_dropout_only_in_training():
    model, idx = tiny(dropout=0.5), tokens()
    torch.testing.assert_close(model(idx)[0], model(idx)[0], rtol=0, atol=0)
    model.train()
    assert not torch.allclose(model(idx)[0], model(idx)[0])


def test_tied_embeddings_share_one_tensor():
    model = tiny(tie_embeddings=True)
    assert model.unembed.weight is model.embed.weight
    assert model.num_params() == tiny().num_params() - TINY["d_vocab"] * TINY["d_model"]


def test_readout_decodes_the_last_layer_to_the_logits():
    model = tiny()
    last = f"blocks.{model.config.n_layers - 1}.hook_resid_post"
    logits, cache = model.run_with_cache(tokens(), [last])
    assert torch.equal(model.readout(cache[last]), logits)


def test_too_long_sequence_rejected():
    with refuses("n_ctx", "17", error=ValueError):  # the limit and the length asked for
        tiny()(tokens(T=17))


@pytest.mark.parametrize("pos, conv", [("rope", 0), ("learned", 0), ("rope", 4)])
def test_registry_round_trip(pos, conv):
    model, idx = tiny(pos=pos, conv_kernel=conv), tokens()
    spec = model_spec(model)
    assert spec["arch"] == "transformer" and spec["config"]["pos"] == pos
    clone = build_model(**spec)
    clone.load_state_dict(model.state_dict())
    clone.eval()
    assert torch.equal(clone(idx)[0], model(idx)[0])


@pytest.mark.parametrize(
    "key, value, rule",
    [
        ("pos", "alibi", "rope or learned"),
        ("act", "swish", "gelu, gelu_tanh or relu"),
        ("norm", "rmsnorm", "layernorm"),
        ("d_head", 7, "even"),
        ("tie_embeddings", "yes", "true or false"),
    ],
)
def test_config_validation_names_key(key, value, rule):
    with refuses_key(f"model.{key}", value, rule):
        Transformer(TransformerConfig(**{**TINY, key: value}))


@pytest.mark.parametrize(
    "key, value",
    [("n_layers", 0), ("d_model", 3.5), ("dropout", 1.0), ("rope_base", -1.0), ("conv_kernel", -1)],
)
def test_config_outside_its_bounds_names_key_and_value(key, value):
    with refuses_key(f"model.{key}", value):
        Transformer(TransformerConfig(**{**TINY, key: value}))


def test_validate_uses_where_prefix():
    with refuses_key("sweep.model.pos", "'x'"):
        TransformerConfig(pos="x").validate(where="sweep.model")


def test_unknown_config_key_named_by_registry():
    with refuses_key("model.n_layer", rule="unknown key"):
        build_model("transformer", {"n_layer": 2})


def test_paper_config_parameter_count():
    cfg = TransformerConfig(
        n_layers=12,
        d_model=512,
        n_heads=8,
        d_head=64,
        d_mlp=2048,
        n_ctx=512,
        d_vocab=41,
        pos="rope",
        act="gelu",
        dropout=0.1,
    )
    with torch.device("meta"):  # no memory, no init cost
        model = Transformer(cfg)
    assert 37_500_000 <= model.num_params() <= 38_100_000
