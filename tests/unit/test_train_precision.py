"""Training precision and compilation on the CPU: bf16 autocast, torch.compile, the GPU-only
settings (TF32, fused AdamW, the bf16 check) read without a GPU, and what the stage record says ran."""

from __future__ import annotations

import dataclasses
import json
import sys
import types

import pytest
import torch
from refusals import assert_names, assert_refused, refuses, refuses_key

from emergence.core import stage_record
from emergence.core.config import load_base
from emergence.core.models.registry import build_model
from emergence.core.train import loop as train_loop
from emergence.core.train.checkpoint import list_checkpoints, load_checkpoint
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import train

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB, B, T = 16, 8, 12
# Stated tolerance: over 50 AdamW steps a bf16-autocast run's loss stays within 0.02 nats of the
# fp32 run's at every step (bf16 keeps 8 mantissa bits, ~0.4 % per product; measured: at most 0.0055).
BF16_LOSS_TOL = 0.02


def gpt(dropout: float = 0.0) -> torch.nn.Module:
    torch.manual_seed(0)
    arch = dict(n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=64, n_ctx=T, d_vocab=VOCAB, dropout=dropout)
    return build_model("transformer", arch)


def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Predict the previous token (attention has to move it), a pure function of the step."""
    idx = torch.randint(VOCAB, (B, T), generator=torch.Generator().manual_seed(step))
    targets = torch.roll(idx, 1, dims=1)
    targets[:, 0] = -1
    return idx, targets


class Interrupt(Exception):
    pass


def fit(tmp_path, name: str, fail_at: int | None = None, dropout: float = 0.0, **overrides):
    model = gpt(dropout)

    def batch_fn(step):
        if step == fail_at:
            raise Interrupt
        return batches(step)

    cfg = dict(steps=50, batch_size=B, lr=3e-3, n_log_checkpoints=2, resume_every=3, device="cpu")
    metrics = train(model, batch_fn, TrainConfig(**{**cfg, **overrides}), tmp_path / name, tmp_path / f"{name}.s")
    return model, metrics


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_bf16_training_tracks_fp32_within_the_stated_tolerance(tmp_path):
    fp32, m32 = fit(tmp_path, "fp32")
    bf16, m16 = fit(tmp_path, "bf16", precision="bf16")
    l32, l16 = m32["loss"].iloc[:-1], m16["loss"].iloc[:-1]
    assert l32.iloc[-5:].mean() < 0.8 * l32.iloc[:5].mean()  # it learns: the comparison is not of two flat lines
    assert (l16 - l32).abs().max() <= BF16_LOSS_TOL
    assert not l16.equals(l32) and not same_weights(fp32, bf16)  # autocast really ran in bf16
    assert {p.dtype for p in bf16.parameters()} == {torch.float32}  # fp32 master weights


def test_bf16_runs_matmuls_in_bf16_and_softmax_loss_weights_and_optimizer_in_fp32():
    model = gpt()
    cfg = TrainConfig(steps=1, batch_size=B, lr=1e-3, device="cpu", precision="bf16")
    forward = train_loop.StepForward(model, cfg, "cpu", "train")
    idx, targets = batches(0)
    patterns = []
    with model.hooks([(lambda n: n.endswith("hook_pattern"), lambda x, _: patterns.append(x.dtype))]):
        logits, loss = forward(idx, targets)
    assert logits.dtype == torch.bfloat16 and loss.dtype == torch.float32
    assert patterns == [torch.float32] * 2  # the explicit softmax a hook reads
    optimizer = train_loop._make_optimizer(model, cfg, "cpu")
    loss.backward()
    optimizer.step()
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert {s["exp_avg"].dtype for s in optimizer.state.values()} == {torch.float32}
    plain_logits, plain_loss = train_loop.StepForward(model, dataclasses.replace(cfg, precision="fp32"), "cpu", "t")(
        idx, targets
    )
    assert plain_logits.dtype == torch.float32 and plain_loss.dtype == torch.float32


def test_float64_models_keep_float64_softmax_and_loss():
    model = build_model("attn_only", dict(n_layers=1, d_vocab=VOCAB, n_ctx=T, dtype="float64"))
    idx, targets = batches(0)
    seen = []
    with model.hooks([(lambda n: n.endswith("hook_pattern"), lambda x, _: seen.append(x.dtype))]):
        _, loss = model(idx, targets)
    assert loss.dtype == torch.float64 and seen == [torch.float64]


def test_resume_is_bit_exact_in_bf16_with_dropout(tmp_path):
    fit(tmp_path, "ref", steps=8, precision="bf16", dropout=0.2)
    with pytest.raises(Interrupt):
        fit(tmp_path, "again", steps=8, precision="bf16", dropout=0.2, fail_at=7)
    fit(tmp_path, "again", steps=8, precision="bf16", dropout=0.2)
    for (_, a), (_, b) in zip(list_checkpoints(tmp_path / "ref"), list_checkpoints(tmp_path / "again"), strict=True):
        assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (tmp_path / "ref/metrics.parquet").read_bytes() == (tmp_path / "again/metrics.parquet").read_bytes()


def test_compiled_training_matches_eager_and_resumes_bit_exact(tmp_path):
    eager, m_eager = fit(tmp_path, "eager", steps=6, dropout=0.0)
    compiled, m_compiled = fit(tmp_path, "compiled", steps=6, dropout=0.0, compile=True)
    # Inductor fuses and reorders float sums: close to eager, not bitwise (stated tolerance 1e-4).
    for a, b in zip(eager.parameters(), compiled.parameters()):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(m_eager["loss"], m_compiled["loss"], atol=1e-5, rtol=1e-5)
    with pytest.raises(Interrupt):
        fit(tmp_path, "again", steps=6, dropout=0.0, compile=True, fail_at=5)
    again, _ = fit(tmp_path, "again", steps=6, dropout=0.0, compile=True)
    assert same_weights(again, compiled)
    final, info = load_checkpoint(tmp_path / "compiled/step6")
    assert info["meta"]["train"]["compile"] is True and info["meta"]["train"]["precision"] == "fp32"


def test_a_failed_compile_says_so_once_and_trains_on_in_eager_mode(tmp_path, monkeypatch, capfd):
    calls, modes = [], []

    def broken_compile(model, mode):
        modes.append(mode)

        def run(*args, **kwargs):
            calls.append(1)
            raise RuntimeError("C++ compiler not found\nlong backtrace")

        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    fallback, _ = fit(tmp_path, "fallback", steps=5, compile=True, compile_mode="reduce-overhead")
    err = capfd.readouterr().err
    (said,) = [line for line in err.splitlines() if "compile" in line]
    assert said.startswith("warning: train: ")
    assert_names(said, "torch.compile", "(RuntimeError: C++ compiler not found)", "eager")  # the first line of why
    assert calls == [1] and modes == ["reduce-overhead"]  # tried once, in the mode asked for, then eager for good
    cfg = TrainConfig(steps=1, batch_size=1, lr=1e-3, compile=True, compile_mode="reduce-overhead")
    forward = train_loop.StepForward(gpt(0.0), cfg, "cpu", "train")
    assert forward.path == "compiled (reduce-overhead)"  # the stage record names the mode asked for ...
    forward(torch.zeros(1, 4, dtype=torch.long))  # torch.compile is still the broken one: eager runs it
    assert forward.path == "eager (compile failed)"  # ... and what ran once the compile failed
    eager, _ = fit(tmp_path, "eager", steps=5)
    assert same_weights(fallback, eager)  # eager is the same function


def test_bf16_on_a_gpu_that_cannot_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: f"Tesla V100 ({device})")
    with refuses("bf16", "cuda:1", "Tesla V100 (cuda:1)", "base.precision: fp32") as e:
        train_loop.check_precision("bf16", "cuda:1")
    assert_refused([str(e.value)], "base.precision")
    train_loop.check_precision("bf16", "cpu")  # every CPU does bf16 autocast
    train_loop.check_precision("fp32", "cuda:1")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    train_loop.check_precision("bf16", "cuda")


def test_gpu_runs_get_fused_adamw_and_tf32_matmuls_and_the_cpu_neither():
    model = gpt()
    cfg = TrainConfig(steps=1, batch_size=B, lr=1e-3)
    assert train_loop._make_optimizer(model, cfg, "cuda:0").defaults["fused"] is True
    assert train_loop._make_optimizer(model, cfg, "cpu").defaults["fused"] is None
    assert (
        train_loop._make_optimizer(model, dataclasses.replace(cfg, optimizer="sgd"), "cuda").defaults["fused"] is None
    )
    before = torch.get_float32_matmul_precision()
    assert before == "highest"
    with train_loop._fast_matmuls("cuda:0"):
        assert torch.get_float32_matmul_precision() == "high"  # TF32
    assert torch.get_float32_matmul_precision() == before
    with train_loop._fast_matmuls("cpu"):
        assert torch.get_float32_matmul_precision() == "highest"
    with pytest.raises(Interrupt), train_loop._fast_matmuls("cuda"):
        raise Interrupt
    assert torch.get_float32_matmul_precision() == before  # restored on the way out of an error too


@pytest.mark.parametrize(
    "change, key, value, rule",
    [
        ({"precision": "fp16"}, "train.precision", "'fp16'", "fp32, bf16"),
        ({"compile": "yes"}, "train.compile", "'yes'", "true or false"),
        (
            {"compile_mode": "cudagraphs"},
            "train.compile_mode",
            "'cudagraphs'",
            "default, reduce-overhead, max-autotune-no-cudagraphs",
        ),
    ],
)
def test_validate_names_precision_and_compile(change, key, value, rule):
    cfg = dataclasses.replace(TrainConfig(steps=10, batch_size=2, lr=1e-3), **change)
    with refuses(key, value, rule) as e:
        cfg.validate()
    assert_refused([str(e.value)], key)


def test_base_hands_device_precision_and_compile_to_training():
    given = {"device": "cuda", "precision": "bf16", "compile": True, "compile_mode": "reduce-overhead"}
    assert load_base({"base": {"seeds": [0], **given}}).train_keys() == given
    default = {"device": "auto", "precision": "fp32", "compile": False, "compile_mode": "default"}
    assert load_base({"base": {"seeds": [0]}}).train_keys() == default
    with refuses_key("base.compile_mode", "'cudagraphs'"):
        load_base({"base": {"seeds": [0], "compile_mode": "cudagraphs"}})
    with refuses_key("base.precision", "'fp16'", "fp32, bf16"):
        load_base({"base": {"seeds": [0], "precision": "fp16"}})


# ---- what ran, in the stage record -------------------------------------------


def test_the_stage_record_says_what_trained(tmp_path, monkeypatch):
    monkeypatch.setattr(stage_record, "_NOTES", {})
    fit(tmp_path, "bf16", steps=2, precision="bf16")
    assert stage_record._NOTES == {"training": {"device": "cpu", "precision": "bf16", "forward": "eager"}}
    record = stage_record.begin("stages.x.y", ["--seed", "0"], env={})
    assert stage_record._NOTES == {}  # a new stage starts with no notes
    stage_record.note("training", {"device": "cuda", "forward": "compiled"})
    path = stage_record.finish(record, 0, root=tmp_path / "logs")
    assert json.loads(path.read_text())["training"] == {"device": "cuda", "forward": "compiled"}


def test_mamba2_reports_hf_s_dispatch_and_a_gpu_without_the_extra_says_so(tmp_path, monkeypatch, capfd):
    from transformers.integrations.hub_kernels import use_kernel_func_from_hub_with_fallback
    from transformers.models.mamba2 import modeling_mamba2

    model = build_model("mamba2", dict(n_layers=1, d_model=32, d_vocab=VOCAB, n_ctx=T, d_state=8, head_dim=16))
    torch_paths = {"mamba2.scan": "torch", "mamba2.chunk_scan": "torch", "mamba2.conv1d": "torch"}
    assert model.kernels() == torch_paths  # no mamba_ssm on a CPU machine
    assert train_loop._kernels(model, "cpu", "grounding_train") == torch_paths
    assert capfd.readouterr().err == ""  # the CPU has no other path: nothing to say
    train_loop._kernels(model, "cuda:0", "grounding_train")
    assert capfd.readouterr().err == (
        "warning: grounding_train: mamba2.chunk_scan, mamba2.conv1d, mamba2.scan run the torch path on cuda:0: "
        "the .[gpu] extra (mamba-ssm, causal-conv1d) is not importable (docs/gpu.md says how to carry it)\n"
    )
    # HF's own decorator over a package that imports: the wrapper it builds is read as fused.
    fake = types.ModuleType("fake_mamba_ssm")
    fake.mamba_chunk_scan_combined = lambda *a, **k: None
    monkeypatch.setitem(sys.modules, "fake_mamba_ssm", fake)
    fused = use_kernel_func_from_hub_with_fallback("mamba_chunk_scan_combined", "fake_mamba_ssm")(
        modeling_mamba2.mamba2_chunk_scan.__wrapped__
    )
    monkeypatch.setattr(modeling_mamba2, "mamba2_chunk_scan", fused)
    assert model.kernels() == {**torch_paths, "mamba2.chunk_scan": "fused"}
    assert "mamba2.chunk_scan" not in capfd.readouterr().err


def _hf_wrapper(monkeypatch, entry_point: str, package_fn: str, impl) -> None:
    """HF's own decorator over a fake package that imports, as mamba_ssm / causal_conv1d would."""
    from transformers.integrations.hub_kernels import use_kernel_func_from_hub_with_fallback
    from transformers.models.mamba2 import modeling_mamba2

    fake = types.ModuleType(f"fake_{package_fn}")
    setattr(fake, package_fn, impl)
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    torch_fn = getattr(modeling_mamba2, entry_point).__wrapped__
    monkeypatch.setattr(
        modeling_mamba2, entry_point, use_kernel_func_from_hub_with_fallback(package_fn, fake.__name__)(torch_fn)
    )


def test_mamba_ssm_without_causal_conv1d_trains_on_the_unfused_scan(monkeypatch, caplog):
    # mamba_ssm's fused training scan calls causal_conv1d's function, None without that package: HF
    # still dispatches to it, and the first training step failed so on an H200.
    from transformers.models.mamba2 import modeling_mamba2

    def no_causal_conv1d(*a, **k):
        raise TypeError("'NoneType' object is not callable")

    _hf_wrapper(monkeypatch, "mamba2_split_conv1d_scan_combined", "mamba_split_conv1d_scan_combined", no_causal_conv1d)
    arch = dict(n_layers=1, d_model=32, d_vocab=VOCAB, n_ctx=T, d_state=8, head_dim=16)
    assert build_model("mamba2", arch).kernels()["mamba2.scan"] == "torch"
    assert "causal_conv1d does not" in caplog.text and "unfused scan" in caplog.text
    fn = modeling_mamba2.mamba2_split_conv1d_scan_combined
    assert not hasattr(fn, "__wrapped__") and fn.__module__ == modeling_mamba2.__name__  # HF's torch function
    model = build_model("mamba2", arch).train()
    idx = torch.randint(VOCAB, (2, T))
    loss = model(idx, idx)[1]
    loss.backward()
    assert torch.isfinite(loss)


def test_mamba_ssm_with_causal_conv1d_keeps_the_fused_scan(monkeypatch, caplog):
    from transformers.models.mamba2 import modeling_mamba2

    _hf_wrapper(monkeypatch, "mamba2_split_conv1d_scan_combined", "mamba_split_conv1d_scan_combined", print)
    _hf_wrapper(monkeypatch, "causal_conv1d_fn", "causal_conv1d_fn", print)
    fused = modeling_mamba2.mamba2_split_conv1d_scan_combined
    model = build_model("mamba2", dict(n_layers=1, d_model=32, d_vocab=VOCAB, n_ctx=T, d_state=8, head_dim=16))
    assert modeling_mamba2.mamba2_split_conv1d_scan_combined is fused and "unfused" not in caplog.text
    assert model.kernels() == {"mamba2.scan": "fused", "mamba2.chunk_scan": "torch", "mamba2.conv1d": "fused"}
