"""The attention-only model of the association study: zero init, relative bias, causality, hooks."""

from __future__ import annotations

import torch
from refusals import keys_of, refuses_key
from tiny_models import no_hooks

from emergence.core.models.attn_only import AttnOnly, diagonal_bias
from emergence.core.models.attn_only_config import AttnOnlyConfig
from emergence.core.models.registry import build_model


def random_model(n_layers: int = 2, V: int = 6, T: int = 5) -> torch.nn.Module:
    model = build_model("attn_only", dict(n_layers=n_layers, d_vocab=V, n_ctx=T))
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    return model


def test_every_weight_starts_at_exactly_zero():
    model = build_model("attn_only", dict(n_layers=3, d_vocab=10, n_ctx=8))
    assert all(torch.count_nonzero(p) == 0 for p in model.parameters())
    idx = torch.randint(0, 10, (2, 8))
    logits, loss = model(idx, idx)
    assert torch.all(logits == 0) and torch.isclose(loss, torch.log(torch.tensor(10.0)))


def test_position_bias_sits_on_the_subdiagonals():
    P = torch.tensor([10.0, 20.0, 30.0, 40.0])
    bias = diagonal_bias(P, 4)
    assert bias[3, 0] == 40 and bias[3, 3] == 10 and bias[2, 1] == 20
    assert torch.all(torch.isinf(bias.triu(1)[bias.triu(1) != 0]))


def test_causal_later_tokens_do_not_change_earlier_logits():
    model = random_model()
    idx = torch.tensor([[1, 2, 3, 4, 5]])
    edited = idx.clone()
    edited[0, 3:] = 0
    a, _ = model(idx)
    b, _ = model(edited)
    assert torch.allclose(a[0, :3], b[0, :3]) and not torch.allclose(a[0, 3:], b[0, 3:])


def test_shared_hook_names_and_hygiene():
    model = random_model()
    logits, cache = model.run_with_cache(torch.tensor([[1, 2, 3]]))
    for name in ("blocks.0.hook_resid_pre", "blocks.1.attn.hook_pattern", "blocks.1.hook_resid_post"):
        assert name in cache
    pattern = cache["blocks.0.attn.hook_pattern"]
    assert pattern.shape == (1, 1, 3, 3) and torch.allclose(pattern.sum(-1), torch.ones(1, 1, 3))
    assert torch.allclose(cache["blocks.1.hook_resid_post"] @ model.W_O, logits)
    assert no_hooks(model)


def test_float64_config_builds_float64_weights():
    model = build_model("attn_only", dict(n_layers=1, d_vocab=4, n_ctx=3, dtype="float64"))
    assert {p.dtype for p in model.parameters()} == {torch.float64}


def test_a_sequence_shorter_than_n_ctx_reads_the_first_distances_of_p():
    """n_ctx 4, T 2, W = 0: the scores are P[t - k], i.e. [[P0, -inf], [P1, P0]], whatever P[2:] holds."""
    model = build_model("attn_only", dict(n_layers=1, d_vocab=3, n_ctx=4))
    with torch.no_grad():
        model.blocks[0].attn.P.copy_(torch.tensor([1.0, 2.0, 30.0, 40.0]))
    _, cache = model.run_with_cache(torch.tensor([[0, 1]]), ["blocks.0.attn.hook_scores"])
    want = torch.tensor([[1.0, float("-inf")], [2.0, 1.0]])
    torch.testing.assert_close(cache["blocks.0.attn.hook_scores"][0, 0], want)


def test_a_config_built_in_code_is_refused_naming_each_bad_key_on_a_line_of_its_own():
    with refuses_key("model.n_layers", 0) as e:
        AttnOnly(AttnOnlyConfig(n_layers=0, d_vocab=0))
    assert keys_of(str(e.value).splitlines()) == ["model.n_layers", "model.d_vocab"]
    with refuses_key("assoc_model.dtype", "float16"):
        build_model("attn_only", {"dtype": "float16"}, "assoc_model")
