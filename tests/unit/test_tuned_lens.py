"""Tuned lens: the logit lens at init, the model's own surprisal on top, padding-proof, a frozen model stays frozen."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from refusals import refuses_key
from tiny_models import no_hooks

from emergence.core.config import from_dict
from emergence.core.models.registry import build_model
from emergence.interp import tuned_lens
from emergence.interp.lens_params import LensParams
from emergence.interp.tuned_lens import TunedLens, layer_kl, layer_surprisal, resid_names, train_lens
from emergence.studies.grounding.gain import target_surprisal

pytestmark = pytest.mark.usefixtures("one_thread")

V, N_LAYERS = 11, 2
TINY = {
    "transformer": dict(n_layers=N_LAYERS, d_model=32, n_heads=4, d_head=8, d_mlp=64, n_ctx=16, d_vocab=V),
    "mamba2": dict(n_layers=N_LAYERS, d_model=32, head_dim=16, d_state=8, d_vocab=V, n_ctx=16, chunk_size=4),
    "lstm": dict(n_layers=N_LAYERS, d_model=32, d_vocab=V, n_ctx=16),
}
ARCHS = sorted(TINY)
FAST = LensParams(steps=30, batch_size=8, lr=1e-2, seed=0)


def tiny(arch: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(arch, TINY[arch]).eval()


def windows(n: int = 48, T: int = 12, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, V, (n, T))


def contexts_and_targets(n: int = 9, seed: int = 1) -> tuple[list[list[int]], list[int]]:
    """Contexts of lengths 1..9 (mamba2's chunk of 4 is crossed and padded) and random targets."""
    rng = np.random.default_rng(seed)
    contexts = [rng.integers(0, V, 1 + i % 9).tolist() for i in range(n)]
    return contexts, rng.integers(0, V, n).tolist()


@pytest.mark.parametrize("arch", ARCHS)
def test_fresh_lens_is_the_logit_lens(arch):
    model, (contexts, targets) = tiny(arch), contexts_and_targets()
    lens = TunedLens(N_LAYERS, 32)
    fresh, logit = layer_surprisal(model, lens, contexts, targets), layer_surprisal(model, None, contexts, targets)
    assert np.array_equal(fresh, logit)
    assert np.array_equal(layer_kl(model, lens, windows()), layer_kl(model, None, windows()))


@pytest.mark.parametrize("arch", ARCHS)
def test_top_row_is_the_models_surprisal_and_padding_changes_nothing(arch):
    model, (contexts, targets) = tiny(arch), contexts_and_targets()
    lens, _ = train_lens(model, windows(), LensParams(steps=3, batch_size=4, lr=1e-2))  # non-identity translators
    s = layer_surprisal(model, lens, contexts, targets, batch_size=256)
    assert s.shape == (N_LAYERS + 1, len(contexts))
    np.testing.assert_allclose(s[-1], target_surprisal(model, contexts, targets), rtol=0, atol=1e-5)
    np.testing.assert_allclose(layer_surprisal(model, lens, contexts, targets, batch_size=1), s, rtol=0, atol=1e-5)
    assert not np.allclose(s[0], layer_surprisal(model, None, contexts, targets)[0])  # the lens is applied


@pytest.mark.parametrize("arch", ARCHS)
def test_surprisal_and_kl_read_the_right_layer(arch):
    """Each row against a hand computation from the cached resid_pre of its own layer."""
    model, (contexts, targets) = tiny(arch), contexts_and_targets(n=1)
    lens, _ = train_lens(model, windows(), LensParams(steps=3, batch_size=4, lr=1e-2))
    logits, cache = model.run_with_cache(torch.tensor(contexts), resid_names(model))
    want = [
        -model.readout(lens(cache[f"blocks.{l}.hook_resid_pre"][0, -1], l)).log_softmax(-1)[targets[0]]
        for l in range(N_LAYERS)
    ]
    np.testing.assert_allclose(
        layer_surprisal(model, lens, contexts, targets)[:-1, 0], torch.stack(want).detach().numpy(), rtol=0, atol=1e-5
    )

    w = windows(n=3)
    logits, cache = model.run_with_cache(torch.tensor(w), resid_names(model))
    want = [
        F.kl_div(
            model.readout(lens(cache[f"blocks.{l}.hook_resid_pre"], l)).log_softmax(-1),
            logits.log_softmax(-1),
            log_target=True,
            reduction="batchmean",
        ).item()
        / w.shape[1]
        for l in range(N_LAYERS)
    ]
    kl = layer_kl(model, lens, w, batch_size=2)
    np.testing.assert_allclose(kl, want, rtol=1e-4)
    assert kl.dtype == np.float64  # summed over every token in float64, whatever the model's precision


@pytest.mark.parametrize("arch", ARCHS)
def test_training_beats_the_logit_lens_and_leaves_the_model_alone(arch):
    model = tiny(arch).train()
    model.embed.weight.requires_grad_(False)  # a mixed set of flags to restore
    flags = [p.requires_grad for p in model.parameters()]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    lens, history = train_lens(model, windows(), FAST)

    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert [p.requires_grad for p in model.parameters()] == flags and not model.training
    assert all(p.grad is None for p in model.parameters()) and no_hooks(model)
    assert list(history.columns) == ["step", "layer", "kl"] and len(history) == FAST.steps * N_LAYERS
    assert history["kl"].dtype == float and sorted(history["layer"].unique()) == list(range(N_LAYERS))
    held_out = windows(n=16, seed=5)
    assert (layer_kl(model, lens, held_out) < layer_kl(model, None, held_out)).all()


@pytest.mark.parametrize("arch", ["lstm"])
def test_same_seed_same_lens(arch):
    model = tiny(arch)
    a, _ = train_lens(model, windows(), FAST)
    torch.manual_seed(123)  # the global RNG must not matter
    b, _ = train_lens(model, windows(), FAST)
    c, _ = train_lens(model, windows(), LensParams(steps=FAST.steps, batch_size=8, lr=1e-2, seed=1))
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())
    assert not all(torch.equal(v, c.state_dict()[k]) for k, v in a.state_dict().items())


# steps and batch_size count from 1; any positive learning rate, however small, is a learning rate
@pytest.mark.parametrize(
    "key, last_valid, value",
    [
        ("steps", 1, 0),
        ("batch_size", 1, 0),
        ("lr", 1e-9, 0.0),
        ("lr", 0.5, -1e-3),  # 0.5: a rate below 1 passes too
    ],
)
def test_params_name_the_key(key, last_valid, value):
    from_dict(LensParams, {key: last_valid}, "grounding_lens")
    with refuses_key(f"grounding_lens.{key}", value):
        from_dict(LensParams, {key: value}, "grounding_lens")


def test_translator_adds_its_affine_map_to_the_identity():
    lens = TunedLens(2, 3)
    with torch.no_grad():
        lens.translators[1].weight.copy_(torch.tensor([[1.0, 0, 0], [0, 2, 0], [0, 0, 0]]))
        lens.translators[1].bias.copy_(torch.tensor([0.5, 0, -1]))
    h = torch.tensor([[1.0, 2.0, 3.0]])
    assert torch.equal(lens(h, 1), torch.tensor([[2.5, 6.0, 2.0]]))  # h + A h + b
    assert torch.equal(lens(h, 0), h)  # layer 0's translator is still zero


def test_kl_is_per_position_over_the_vocabulary():
    teacher = torch.tensor([[[0.5, 0.5], [0.9, 0.1], [1.0, 0.0]]]).clamp(min=1e-30).log()  # (1, 3, 2)
    student = torch.tensor([[[0.25, 0.75], [0.9, 0.1], [0.5, 0.5]]]).log()
    got = tuned_lens._kl(teacher, student)
    want = [0.5 * np.log(0.5 / 0.25) + 0.5 * np.log(0.5 / 0.75), 0.0, np.log(2.0)]  # sum_v p log(p / q)
    assert got.shape == (1, 3)
    np.testing.assert_allclose(got[0].numpy(), want, rtol=1e-5, atol=1e-6)


def test_history_starts_at_the_logit_lens_kl_and_one_window_is_enough(monkeypatch):
    """With a single window every batch is that window: step 0's KL per layer (before any update) is the
    logit lens's mean KL per token on it."""
    model, w = tiny("transformer"), windows(n=1, T=12, seed=3)
    bars = []
    real_tqdm = tuned_lens.tqdm
    monkeypatch.setattr(tuned_lens, "tqdm", lambda it, **kw: bars.append(kw) or real_tqdm(it, **kw))
    _, history = train_lens(model, w, LensParams(steps=2, batch_size=3, lr=1e-2))
    first = history[history["step"] == 0].sort_values("layer")["kl"].to_numpy()
    np.testing.assert_allclose(first, layer_kl(model, None, w), rtol=1e-5)
    assert bars == [{"desc": "tuned lens", "leave": False, "disable": None}]  # a transient bar, off when not a tty


def test_the_learning_rate_and_the_token_dtype_are_the_lenss_own(monkeypatch):
    model, w = tiny("lstm"), windows()
    moved = []

    class Spy(TunedLens):
        def to(self, *args, **kw):
            moved.append(args)
            return super().to(*args, **kw)

    monkeypatch.setattr(tuned_lens, "TunedLens", Spy)
    slow, _ = train_lens(model, w, LensParams(steps=3, batch_size=4, lr=1e-3))
    fast, _ = train_lens(model, w, LensParams(steps=3, batch_size=4, lr=1e-2))
    assert moved == [(torch.device("cpu"),)] * 2  # the lens goes where the model is
    assert not torch.allclose(slow.translators[0].bias, fast.translators[0].bias)
    # windows stored compactly (uint8) are read as token ids, not as a mask or a type the embedding refuses
    small, _ = train_lens(model, w.astype(np.uint8), LensParams(steps=3, batch_size=4, lr=1e-2))
    fast_again, _ = train_lens(model, w, LensParams(steps=3, batch_size=4, lr=1e-2))
    assert all(torch.equal(v, fast_again.state_dict()[k]) for k, v in small.state_dict().items())
