"""Hook points: vocabulary, hygiene, caching, ablation, patching, attention saliency."""

import pytest
import torch
from refusals import refuses

from emergence.core.models.transformer import Transformer
from emergence.core.models.transformer_config import TransformerConfig

CFG = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, d_mlp=64, n_ctx=16, d_vocab=11)
B, T = 2, 9
PER_LAYER = [
    "hook_resid_pre",
    "hook_resid_mid",
    "hook_resid_post",
    "hook_attn_out",
    "hook_mlp_out",
    "attn.hook_q",
    "attn.hook_k",
    "attn.hook_v",
    "attn.hook_pattern",
    "attn.hook_z",
]


def tiny(pos: str = "rope") -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig(**CFG, pos=pos)).eval()


def tokens() -> torch.Tensor:
    return torch.randint(0, CFG["d_vocab"], (B, T), generator=torch.Generator().manual_seed(1))


def live_hooks(model: Transformer) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_every_hook_name_exists_with_its_shape(pos):
    model = tiny(pos)
    points = model.hook_points()
    expected = ["hook_embed", "ln_final.hook_normalized"] + [f"blocks.{L}.{h}" for L in range(2) for h in PER_LAYER]
    if pos == "learned":
        expected.append("hook_pos_embed")
    assert set(expected) <= set(points)
    assert ("hook_pos_embed" in points) == (pos == "learned")
    assert all(point.name == name for name, point in points.items())

    _, cache = model.run_with_cache(tokens())
    H, dh, d = CFG["n_heads"], CFG["d_head"], CFG["d_model"]
    for name in expected:
        short = name.rsplit(".", 1)[-1]
        shape = {
            "hook_q": (B, T, H, dh),
            "hook_k": (B, T, H, dh),
            "hook_v": (B, T, H, dh),
            "hook_z": (B, T, H, dh),
            "hook_pattern": (B, H, T, T),
        }.get(short, (B, T, d))
        assert cache[name].shape == shape, name


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_q_and_k_are_hooked_before_the_rotation_and_after_it_as_transformer_lens_names_them(pos):
    from emergence.core.models.transformer import apply_rope, rope_tables

    model = tiny(pos)
    qkv = []
    handle = model.blocks[1].attn.qkv.register_forward_hook(lambda m, i, out: qkv.append(out))
    _, cache = model.run_with_cache(tokens())
    handle.remove()
    H, dh = CFG["n_heads"], CFG["d_head"]
    q, k, _ = qkv[0].view(B, T, 3, H, dh).unbind(2)  # the projections, before any rotation
    torch.testing.assert_close(cache["blocks.1.attn.hook_q"], q, rtol=0, atol=0)
    torch.testing.assert_close(cache["blocks.1.attn.hook_k"], k, rtol=0, atol=0)
    if pos == "learned":
        assert "blocks.1.attn.hook_rot_q" not in cache and "blocks.1.attn.hook_rot_k" not in cache
        return
    cos, sin = (t[:T] for t in rope_tables(CFG["n_ctx"], dh, 10000.0))
    torch.testing.assert_close(cache["blocks.1.attn.hook_rot_q"], apply_rope(q, cos, sin))
    torch.testing.assert_close(cache["blocks.1.attn.hook_rot_k"], apply_rope(k, cos, sin))
    assert not torch.allclose(cache["blocks.1.attn.hook_rot_q"], q)  # the rotation moved them


def test_residual_stream_decomposes():
    _, c = tiny().run_with_cache(tokens())
    for L in range(2):
        p = f"blocks.{L}."
        torch.testing.assert_close(c[p + "hook_resid_mid"], c[p + "hook_resid_pre"] + c[p + "hook_attn_out"])
        torch.testing.assert_close(c[p + "hook_resid_post"], c[p + "hook_resid_mid"] + c[p + "hook_mlp_out"])
    torch.testing.assert_close(c["blocks.1.hook_resid_pre"], c["blocks.0.hook_resid_post"])


def test_no_hook_survives_exception_in_with_block():
    model = tiny()
    with pytest.raises(RuntimeError, match="boom"):
        with model.hooks([(lambda n: True, lambda t, n: None)]):
            assert live_hooks(model) == len(model.hook_points())
            raise RuntimeError("boom")
    assert live_hooks(model) == 0


def test_no_hook_survives_exception_in_hook_fn():
    model = tiny()

    def explode(t, name):
        raise RuntimeError(f"boom in {name}")

    with pytest.raises(RuntimeError, match="boom in blocks.1.hook_mlp_out"):
        with model.hooks([("blocks.0.hook_attn_out", lambda t, n: None), ("blocks.1.hook_mlp_out", explode)]):
            model(tokens())
    assert live_hooks(model) == 0
    assert not model.blocks[0].attn.hook_pattern.has_hooks


def test_unknown_hook_name_lists_close_names_and_leaks_nothing():
    model = tiny()
    with refuses("blocks.0.hook_resid_pst", "blocks.0.hook_resid_post", error=KeyError):  # the name, the close one
        with model.hooks(
            [("blocks.0.hook_attn_out", lambda t, n: None), ("blocks.0.hook_resid_pst", lambda t, n: None)]
        ):
            pass
    assert live_hooks(model) == 0
    with refuses("hook_nope", error=KeyError):
        model.run_with_cache(tokens(), ["hook_nope"])


def test_hook_return_value_replaces_activation():
    model = tiny()
    with model.hooks([("ln_final.hook_normalized", lambda t, n: torch.zeros_like(t))]):
        logits, _ = model(tokens())
    assert torch.equal(logits, torch.zeros_like(logits))  # unembed has no bias


def test_run_with_cache_selection_and_detach():
    model, idx = tiny(), tokens()
    logits, cache = model.run_with_cache(idx, ["blocks.1.attn.hook_z", "hook_embed"])
    assert set(cache) == {"blocks.1.attn.hook_z", "hook_embed"}
    assert torch.equal(logits, model(idx)[0])
    assert all(t.grad_fn is None for t in cache.values())
    _, cache = model.run_with_cache(idx, lambda n: n.endswith("hook_mlp_out"), detach=False)
    assert set(cache) == {"blocks.0.hook_mlp_out", "blocks.1.hook_mlp_out"}
    assert all(t.grad_fn is not None for t in cache.values())
    assert live_hooks(model) == 0


def test_zero_ablating_any_single_head_changes_logits():
    model, idx = tiny(), tokens()
    clean = model(idx)[0]
    for L in range(CFG["n_layers"]):
        for head in range(CFG["n_heads"]):

            def ablate(z, name, head=head):
                z = z.clone()
                z[:, :, head] = 0.0
                return z

            with model.hooks([(f"blocks.{L}.attn.hook_z", ablate)]):
                ablated = model(idx)[0]
            assert (ablated - clean).abs().max() > 1e-6, (L, head)


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_identity_patching_changes_nothing(pos):
    model, idx = tiny(pos), tokens()
    clean = model(idx)[0]
    for name in model.hook_points():
        cached_logits, cache = model.run_with_cache(idx, [name])
        with model.hooks([(name, lambda t, n, cache=cache: cache[n].clone())]):
            patched = model(idx)[0]
        assert torch.equal(patched, cached_logits), name
        if not name.endswith("hook_pattern"):  # listening to the pattern takes the explicit-softmax path
            assert torch.equal(cached_logits, clean), name


def test_pattern_rows_sum_to_one_and_receive_gradients():
    model, idx = tiny(), tokens()
    patterns = {}

    def keep(pattern, name):
        pattern.retain_grad()
        patterns[name] = pattern

    with model.hooks([(lambda n: n.endswith("hook_pattern"), keep)]):
        _, loss = model(idx, idx)
    loss.backward()
    assert len(patterns) == CFG["n_layers"]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    for pattern in patterns.values():
        torch.testing.assert_close(pattern.sum(-1), torch.ones(B, CFG["n_heads"], T))
        assert torch.all(pattern[..., future] == 0)
        saliency = pattern * pattern.grad  # attention x gradient
        assert saliency.abs().sum() > 0
