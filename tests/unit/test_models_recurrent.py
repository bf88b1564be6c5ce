"""Mamba-2 and LSTM: the zoo contract (causality, hooks, unembed, training, checkpoints, config errors)."""

import logging
import re

import pytest
import torch
import torch.nn.functional as F
from refusals import keys_of, refuses, refuses_key
from tiny_models import no_hooks

from emergence.core.models.lstm import LSTM
from emergence.core.models.lstm_config import LSTMConfig
from emergence.core.models.registry import build_model, model_spec
from emergence.core.train.checkpoint import load_checkpoint, save_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

V, N_LAYERS = 11, 2
# chunk_size 4 < T: the scan crosses chunk boundaries and pads the last chunk.
TINY = {
    "mamba2": dict(n_layers=N_LAYERS, d_model=32, head_dim=16, d_state=8, d_vocab=V, n_ctx=16, chunk_size=4),
    "lstm": dict(n_layers=N_LAYERS, d_model=32, d_vocab=V, n_ctx=16),
}
ARCHS = sorted(TINY)
LAST = f"blocks.{N_LAYERS - 1}.hook_resid_post"


def tiny(arch: str, **overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(arch, {**TINY[arch], **overrides}).eval()


def tokens(B: int = 3, T: int = 10, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ARCHS)
def test_shapes_and_loss_ignores_minus_one_targets(arch):
    model, idx = tiny(arch), tokens()
    logits, loss = model(idx)
    assert logits.shape == (3, 10, V) and loss is None
    targets = idx.clone()
    targets[:, :7] = -1
    _, loss = model(idx, targets)
    torch.testing.assert_close(loss, F.cross_entropy(logits[:, 7:].flatten(0, 1), idx[:, 7:].flatten()))


@pytest.mark.parametrize("arch", ARCHS)
def test_causal(arch):
    model, idx = tiny(arch), tokens()
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % V  # t = 6 sits mid-chunk for the Mamba scan
    a, b = model(idx)[0], model(changed)[0]
    torch.testing.assert_close(a[:, :6], b[:, :6], rtol=0, atol=1e-6)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


@pytest.mark.parametrize("arch", ARCHS)
def test_hook_names_shapes_and_chaining(arch):
    model = tiny(arch)
    names = ["hook_embed", "blocks.0.hook_resid_pre", LAST, "ln_final.hook_normalized"]
    assert set(names) <= set(model.hook_points())
    _, cache = model.run_with_cache(tokens())
    assert all(cache[name].shape == (3, 10, 32) for name in names)
    torch.testing.assert_close(cache["blocks.0.hook_resid_pre"], cache["hook_embed"], rtol=0, atol=0)
    torch.testing.assert_close(cache["blocks.1.hook_resid_pre"], cache["blocks.0.hook_resid_post"], rtol=0, atol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_readout_decodes_the_last_layer_to_the_logits(arch):
    model = tiny(arch)
    logits, cache = model.run_with_cache(tokens(), [LAST])
    assert torch.equal(model.readout(cache[LAST]), logits)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("layer", range(N_LAYERS))
def test_replacing_resid_post_changes_the_logits(arch, layer):
    model, idx = tiny(arch), tokens()
    clean, cache = model.run_with_cache(idx)
    other = model.run_with_cache(tokens(seed=2))[1]
    name = f"blocks.{layer}.hook_resid_post"
    with model.hooks([(name, lambda t, n: other[n])]):
        patched = model(idx)[0]
    assert (patched - clean).abs().max() > 1e-3
    if layer == N_LAYERS - 1:  # the last state alone decides the logits
        assert torch.equal(patched, model.readout(other[name]))


@pytest.mark.parametrize("arch", ARCHS)
def test_no_hook_survives_an_exception(arch):
    model = tiny(arch)

    def explode(t, name):
        raise RuntimeError(f"boom in {name}")

    with pytest.raises(RuntimeError, match="boom in blocks.1.hook_resid_pre"):
        with model.hooks([("hook_embed", lambda t, n: None), ("blocks.1.hook_resid_pre", explode)]):
            model(tokens())
    assert no_hooks(model)


@pytest.mark.parametrize("arch", ARCHS)
def test_sgd_lowers_the_loss_on_a_repeated_batch(arch):
    model, idx = tiny(arch).train(), tokens(B=4, T=12)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(20):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


@pytest.mark.parametrize("arch", ARCHS)
def test_checkpoint_round_trip_gives_identical_logits(arch, tmp_path):
    model, idx = tiny(arch), tokens()
    with torch.no_grad():  # move off the init so a fresh build could not pass by accident
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    loaded, info = load_checkpoint(save_checkpoint(model, tmp_path, step=3, meta={}))
    assert info["arch"] == arch and type(loaded) is type(model)
    assert model_spec(loaded) == model_spec(model)
    assert torch.equal(loaded(idx)[0], model(idx)[0])


@pytest.mark.parametrize("arch", ARCHS)
def test_too_long_sequence_rejected(arch):
    with refuses("n_ctx", "17", error=ValueError):  # the limit and the length asked for
        tiny(arch)(tokens(T=17))


@pytest.mark.parametrize(
    "arch, key, value, rule",
    [
        ("mamba2", "head_dim", 24, "expand * d_model = 64"),
        ("mamba2", "n_groups", 3, "heads"),
    ],
)
def test_build_model_names_the_bad_key(arch, key, value, rule):
    with refuses_key(f"model.{key}", value, rule):
        build_model(arch, {**TINY[arch], key: value})


@pytest.mark.parametrize(
    "arch, key, value",
    [
        ("mamba2", "d_state", 0),
        ("mamba2", "chunk_size", 4.0),  # a whole float is still no count
        ("lstm", "n_layers", True),  # nor is a bool
        ("lstm", "dropout", 1.0),
    ],
)
def test_build_model_names_the_key_and_value_outside_its_bounds(arch, key, value):
    with refuses_key(f"model.{key}", value):
        build_model(arch, {**TINY[arch], key: value})


@pytest.mark.parametrize("arch", ARCHS)
def test_unknown_key_and_where_prefix(arch):
    with refuses_key("grounding.model.d_mlp", rule="unknown key"):
        build_model(arch, {"d_mlp": 4}, where="grounding.model")


def test_lstm_dropout_only_in_training_and_keeps_layers_chained():
    model, idx = tiny("lstm", dropout=0.5), tokens()
    assert torch.equal(model(idx)[0], model(idx)[0])
    model.train()
    _, cache = model.run_with_cache(idx)
    assert not torch.allclose(model(idx)[0], model(idx)[0])
    assert torch.equal(cache["blocks.1.hook_resid_pre"], cache["blocks.0.hook_resid_post"])


def test_mamba2_is_the_hf_model_with_hooks():
    from transformers import Mamba2ForCausalLM

    from emergence.core.models.mamba2 import hf_config

    model, idx = tiny("mamba2"), tokens()
    assert model.lm_head.weight is not model.embed.weight  # untied, like the Transformer's default
    rename = [
        (r"^embed\.", "backbone.embeddings."),
        (r"^ln_final\.norm\.", "backbone.norm_f."),
        (r"^blocks\.(\d+)\.mamba\.", r"backbone.layers.\1."),
    ]
    state = {}
    for key, value in model.state_dict().items():
        for ours, theirs in rename:
            key = re.sub(ours, theirs, key)
        state[key] = value
    reference = Mamba2ForCausalLM(hf_config(model.config)).eval()
    reference.load_state_dict(state, strict=True)
    torch.testing.assert_close(reference(idx).logits, model(idx)[0], rtol=0, atol=1e-6)


def test_mamba2_silences_only_the_cpu_fallback_warning():
    tiny("mamba2")
    log = logging.getLogger("transformers.integrations.hub_kernels")

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord(log.name, logging.WARNING, __file__, 0, msg, None, None)

    fallback = "`mamba_chunk_scan_combined` is falling back to its reference PyTorch implementation because ..."
    assert log.filter(record(fallback)) == torch.cuda.is_available()
    assert log.filter(record("Failed to load kernel mamba-ssm"))


@pytest.mark.parametrize("arch", ["transformer", *ARCHS])
def test_hook_normalized_is_taken_before_the_gain_as_in_transformer_lens_4(arch):
    # TransformerLens 4's NormalizationBridge: hook_normalized = (x - mean) / scale (RMS norm: x / rms),
    # the gain and bias applied after it. Gains and biases are set far from 1 and 0 so the two differ.
    transformer = dict(n_layers=N_LAYERS, d_model=32, n_heads=2, d_head=16, d_mlp=64, n_ctx=16, d_vocab=V)
    model = tiny(arch) if arch in TINY else build_model("transformer", transformer).eval()
    norm = model.ln_final.norm if arch == "mamba2" else model.ln_final
    with torch.no_grad():
        norm.weight.uniform_(2.0, 3.0)
        if getattr(norm, "bias", None) is not None:
            norm.bias.uniform_(1.0, 2.0)
    fused = model(tokens())[0]  # nobody listens: the module's own kernel
    logits, cache = model.run_with_cache(tokens(), ["ln_final.hook_normalized", LAST])
    torch.testing.assert_close(logits, fused, rtol=0, atol=1e-5)  # listening changes nothing downstream
    x = cache[LAST]  # what the final norm reads
    if arch == "mamba2":  # RMS norm: x / rms(x), HF's Mamba2RMSNorm's eps
        expected = x / (x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon).sqrt()
    else:  # layer norm: (x - mean) / sqrt(var + eps)
        centred = x - x.mean(-1, keepdim=True)
        expected = centred / (centred.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()
    torch.testing.assert_close(cache["ln_final.hook_normalized"], expected, rtol=0, atol=1e-5)


def test_an_lstm_config_built_in_code_is_refused_naming_each_bad_key_on_a_line_of_its_own():
    with refuses_key("model.n_layers", 0) as e:
        LSTM(LSTMConfig(n_layers=0, d_model=0))
    assert keys_of(str(e.value).splitlines()) == ["model.n_layers", "model.d_model"]
