"""Attention saliency: one backward pass equals the per-layer retain_grad loop."""

from __future__ import annotations

import warnings

import torch
from refusals import refuses
from tiny_models import no_hooks

from emergence.core.models.registry import build_model
from emergence.interp.saliency import _pattern_names, head_saliency, head_saliency_per_layer, layer_flow


def tiny_transformer() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(
        "transformer", dict(n_layers=3, d_model=16, n_heads=2, d_head=8, d_mlp=32, n_ctx=8, d_vocab=11)
    ).eval()


def batch():
    idx = torch.randint(0, 11, (4, 8), generator=torch.Generator().manual_seed(1))
    return idx, torch.tensor([7, 5, 3, 6]), torch.tensor([1, 2, 3, 4])


def test_one_backward_pass_equals_the_per_layer_loop(one_thread):
    model = tiny_transformer()
    fast = head_saliency(model, *batch())
    reference = head_saliency_per_layer(model, *batch())
    assert fast.shape == (3, 4, 2, 8, 8)
    assert torch.allclose(fast, reference, atol=1e-7)
    assert no_hooks(model) and all(p.grad is None for p in model.parameters())


def test_saliency_is_causal_and_stops_at_the_prediction_position(one_thread):
    model = tiny_transformer()
    idx, positions, targets = batch()
    flow = layer_flow(head_saliency(model, idx, positions, targets))  # (L, B, T, T)
    assert torch.all(flow.triu(1) == 0)  # no edge from the future
    assert torch.all(flow[:, 2, 4:] == 0)  # rows after position 3 cannot matter
    assert flow[:, 2, 3].sum() > 0


def test_saliency_layers_come_in_depth_order_past_ten_layers(one_thread):
    """Layer 10 after layer 9, not after layer 1: the hook names sort by their number, not as text.
    A model with no attention is refused by name."""
    torch.manual_seed(0)
    cfg = dict(n_layers=11, d_model=8, n_heads=1, d_head=8, d_mlp=8, n_ctx=8, d_vocab=11)
    model = build_model("transformer", cfg).eval()
    names = _pattern_names(model)
    assert names == [f"blocks.{i}.attn.hook_pattern" for i in range(11)]
    lstm = build_model("lstm", dict(n_layers=1, d_model=8, n_ctx=8, d_vocab=11))
    with refuses("LSTM", "attention", error=ValueError):
        head_saliency(lstm, *batch())


def test_target_loss_indexes_on_the_logits_device_with_no_warning(monkeypatch):
    """The row index is made on the logits' device (on CUDA a CPU index would copy or fail; on this
    CPU-only machine the device asked for is what can be read), and the softmax names its axis."""
    import emergence.interp.saliency as module

    asked = []

    class Torch:
        def __getattr__(self, name):
            return getattr(torch, name)

        def arange(self, *args, **kw):
            asked.append(kw.get("device"))
            return torch.arange(*args, **kw)

    monkeypatch.setattr(module, "torch", Torch())
    logits = torch.zeros(2, 3, 5, device="meta")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an implicit softmax axis warns
        module.target_loss(logits, torch.tensor([1, 2]), torch.tensor([0, 4]))
        module.target_loss(torch.zeros(2, 3, 5), torch.tensor([1, 2]), torch.tensor([0, 4]))
    assert asked == [torch.device("meta"), torch.device("cpu")]
