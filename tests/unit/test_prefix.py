"""Environment prefixes across the zoo: P feature positions before the tokens, loss on tokens only."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from refusals import refuses, refuses_key
from tiny_models import no_hooks

from emergence.core.models.prefix import STD_FLOOR, set_prefix_stats
from emergence.core.models.registry import build_model
from emergence.core.train.checkpoint import list_checkpoints, load_checkpoint, save_checkpoint
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import train
from emergence.interp.saliency import head_saliency
from emergence.studies.grounding.gain import target_surprisal
from emergence.studies.grounding.saliency import saliency_shares

pytestmark = pytest.mark.usefixtures("one_thread")

V, P, D_FEAT = 11, 3, 5
TINY = {
    "transformer": dict(n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, n_ctx=16, d_vocab=V, pos="learned"),
    "mamba2": dict(n_layers=2, d_model=16, head_dim=8, d_state=8, d_vocab=V, n_ctx=16, chunk_size=4),
    "lstm": dict(n_layers=2, d_model=16, d_vocab=V, n_ctx=16),
}


def tiny(arch: str, d_prefix: int = D_FEAT) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(arch, {**TINY[arch], "d_prefix": d_prefix}).eval()


def inputs(B: int = 2, T: int = 6, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (B, T), generator=g), torch.randn(B, P, D_FEAT, generator=g)


@pytest.mark.parametrize("arch", sorted(TINY))
def test_prefix_positions_come_first_and_only_tokens_are_scored(arch):
    model = tiny(arch)
    idx, prefix = inputs()
    targets = torch.randint(0, V, idx.shape)
    logits, loss = model(idx, targets, prefix=prefix)
    assert logits.shape == (2, P + 6, V)
    assert loss.item() == pytest.approx(
        F.cross_entropy(logits[:, P:].flatten(0, 1), targets.flatten()).item(), rel=1e-6
    )
    _, cache = model.run_with_cache(idx, ["blocks.0.hook_resid_pre"], prefix=prefix)
    assert cache["blocks.0.hook_resid_pre"].shape == (2, P + 6, 16)
    other = model(idx, prefix=prefix + 1.0)[0]
    assert (other[:, P:] - logits[:, P:]).abs().max() > 1e-4  # the tokens read the prefix
    assert "hook_prefix" in model.hook_points() and no_hooks(model)


@pytest.mark.parametrize("arch", sorted(TINY))
def test_prefix_hook_sees_the_projected_features(arch):
    model = tiny(arch)
    idx, prefix = inputs()
    seen = {}
    with model.hooks([("hook_prefix", lambda t, n: seen.setdefault(n, t))]):
        model(idx, prefix=prefix)
    assert seen["hook_prefix"].shape == (2, P, 16)
    torch.testing.assert_close(seen["hook_prefix"], model.prefix_proj(prefix))


@pytest.mark.parametrize("arch", sorted(TINY))
def test_hook_embed_sees_the_token_embeddings_alone_and_the_prefix_its_own_hook(arch):
    # as in the Transformer: hook_embed holds the T token positions, whatever prefix comes before them
    model = tiny(arch)
    idx, prefix = inputs()
    _, plain = model.run_with_cache(idx, ["hook_embed"])
    _, cache = model.run_with_cache(idx, ["hook_embed", "hook_prefix"], prefix=prefix)
    assert cache["hook_embed"].shape == (2, 6, 16)
    torch.testing.assert_close(cache["hook_embed"], plain["hook_embed"], rtol=0, atol=0)
    torch.testing.assert_close(cache["hook_prefix"], model.prefix_proj(prefix))


@pytest.mark.parametrize("arch", sorted(TINY))
def test_models_without_prefix_refuse_one_and_validate_the_key(arch):
    model = tiny(arch, d_prefix=0)
    idx, prefix = inputs()
    assert model(idx)[0].shape == (2, 6, V) and not hasattr(model, "prefix_proj")
    with refuses("prefix", "d_prefix = 0", error=ValueError):
        model(idx, prefix=prefix)
    with refuses_key("m.d_prefix", -1):
        build_model(arch, {**TINY[arch], "d_prefix": -1}, "m")


def test_training_loop_takes_dict_batches_and_checkpoints_the_projection(tmp_path):
    model = tiny("transformer").train()
    idx, prefix = inputs(B=4, T=8)
    targets = torch.roll(idx, -1, 1)

    def batch_fn(step: int):
        return {"idx": idx, "prefix": prefix}, targets

    cfg = TrainConfig(
        steps=30,
        batch_size=4,
        lr=0.03,
        n_log_checkpoints=0,
        dense_until=0,
        checkpoint_every=30,
        warmup_steps=0,
        schedule="constant",
    )
    metrics = train(model, batch_fn, cfg, tmp_path / "run", tmp_path / "scratch", progress=False)
    assert metrics.set_index("step")["tokens"][29] == 29 * idx.numel()  # tokens, not prefix positions
    assert metrics["loss"].iloc[28] < metrics["loss"].iloc[0]
    step, path = list_checkpoints(tmp_path / "run")[-1]
    loaded = load_checkpoint(path)[0].eval()
    model.eval()
    torch.testing.assert_close(loaded(idx, prefix=prefix)[0], model(idx, prefix=prefix)[0])


@pytest.mark.parametrize("arch", sorted(TINY))
def test_prefix_is_standardised_with_the_training_features_and_checkpointed(arch, tmp_path):
    model = tiny(arch)
    idx, _ = inputs()
    g = torch.Generator().manual_seed(4)
    train_feats = 7.0 + 0.1 * torch.randn(20, P, D_FEAT, generator=g)  # a large shared offset, small spread
    train_feats[..., 0] = 3.0  # a dimension constant over images
    set_prefix_stats(model, train_feats)
    flat = train_feats.reshape(-1, D_FEAT).double()
    torch.testing.assert_close(model.prefix_mean, flat.mean(0).float())
    assert model.prefix_std[0] == STD_FLOOR
    seen = {}
    with model.hooks([("hook_prefix", lambda t, n: seen.setdefault(n, t))]):
        model(idx, prefix=train_feats[:2])
    z = (train_feats[:2] - model.prefix_mean) / model.prefix_std
    torch.testing.assert_close(seen["hook_prefix"], model.prefix_proj(z))
    assert z[..., 1:].std() == pytest.approx(1.0, abs=0.3) and z[..., 0].abs().max() < 1e-3
    # A per-dimension rescaling of the features, with stats from the rescaled training features: same model.
    shifted = tiny(arch)
    set_prefix_stats(shifted, 2.0 * train_feats - 5.0)
    torch.testing.assert_close(
        shifted(idx, prefix=2.0 * train_feats[:2] - 5.0)[0], model(idx, prefix=train_feats[:2])[0], rtol=1e-4, atol=1e-4
    )
    path = save_checkpoint(model, tmp_path / "ckpt", 0, {})
    loaded = load_checkpoint(path)[0]
    torch.testing.assert_close(loaded.prefix_std, model.prefix_std)
    torch.testing.assert_close(loaded.prefix_mean, model.prefix_mean)


def test_surprisal_and_saliency_read_past_the_prefix():
    model = tiny("transformer")
    contexts, targets = [[1, 2, 3], [4, 5, 6, 7, 8]], [9, 10]
    prefixes = torch.randn(2, P, D_FEAT, generator=torch.Generator().manual_seed(3))
    got = target_surprisal(model, contexts, targets, batch_size=1, prefixes=prefixes)
    for b, (c, t) in enumerate(zip(contexts, targets)):
        logits = model(torch.tensor([c]), prefix=prefixes[b : b + 1])[0]
        assert got[b] == pytest.approx(-logits[0, -1].log_softmax(-1)[t].item(), abs=1e-5)
    shares = saliency_shares(model, contexts, targets, [[], []], prefixes)
    for b, (c, t) in enumerate(zip(contexts, targets)):  # one unpadded context at a time, by definition
        S = head_saliency(
            model, torch.tensor([c]), torch.tensor([P + len(c) - 1]), torch.tensor([t]), prefix=prefixes[b : b + 1]
        )[:, 0]  # (L, H, T, T)
        flow = S.sum(1).abs()
        expected = flow[:, P + len(c) - 1, :P].sum(-1) / flow.sum((-1, -2))
        torch.testing.assert_close(shares["env_to_pred"][b], expected, rtol=1e-4, atol=1e-6)


def test_prefix_stats_are_the_sample_mean_and_std_over_images_and_positions():
    """Two images x two positions, one varying dimension holding 1, 3 / 5, 7: mean 4, sample std
    sqrt(20 / 3) (n - 1 = 3), not the population one, sqrt(5)."""
    model = tiny("transformer")
    feats = torch.zeros(2, 2, D_FEAT)
    feats[..., 1] = torch.tensor([[1.0, 3.0], [5.0, 7.0]])
    set_prefix_stats(model, feats)
    assert model.prefix_mean[1].item() == pytest.approx(4.0)
    assert model.prefix_std[1].item() == pytest.approx((20 / 3) ** 0.5, rel=1e-6)
    assert model.prefix_std[0].item() == pytest.approx(STD_FLOOR) and model.prefix_mean[0].item() == 0.0
