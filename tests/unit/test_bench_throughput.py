"""The training-throughput bench's measuring functions on tiny inputs, against values derived by hand:
the FLOPs it counts for a step, the reference sgemm rate, tokens/s as a median over rounds, and the
achieved GFLOP/s row. Clocks are replaced by scripted ones so every rate is exact."""

from __future__ import annotations

import itertools
import math
import re
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from bench import train_throughput as tt

pytestmark = pytest.mark.usefixtures("one_thread")


def args(**kw):
    base = dict(batch=2, seq=8, d_model=16, layers=2, heads=2, steps=2, rounds=3, warmup=0)
    return tt.parse_args([f"--{k.replace('_', '-')}={v}" for k, v in {**base, **kw}.items()])


class Clock:
    """perf_counter returning 0, then start/stop pairs whose differences are `durations` in turn."""

    def __init__(self, durations):
        self.times = itertools.accumulate(itertools.chain.from_iterable((0.0, d) for d in durations))

    def perf_counter(self):
        return next(self.times)


def linear_builder(d_out: int):
    """A one-matmul model: one-hot (B*T, V) inputs (no gradient) times a (V, d_out) weight.
    FLOPs: forward 2 N V d_out, backward only the weight's gradient, 2 N V d_out more."""

    def build(a):
        torch.manual_seed(0)
        model = torch.nn.Linear(tt.VOCAB, d_out, bias=False)
        return model, lambda idx: model(F.one_hot(idx, tt.VOCAB).float()).square().mean()

    return build


def test_tokens_per_second_is_the_median_step_rate_and_counts_one_steps_flops(monkeypatch):
    a = args(steps=2, rounds=3)
    # Call order: per round, model "one" then "two"; each timing spans a.steps = 2 steps.
    # one: 6, 2, 20 s -> per step 3, 1, 10 -> median 3 (the mean would be 4.67);
    # two: 2, 10, 12 s -> per step 1, 5, 6 -> median 5.
    monkeypatch.setattr(tt, "time", Clock([6, 2, 2, 10, 20, 12]))
    got = tt.tokens_per_second({"one": linear_builder(3), "two": linear_builder(5)}, a)
    n = a.batch * a.seq  # 16 tokens a step
    assert got["one"] == (pytest.approx(n / 3), 4 * n * tt.VOCAB * 3)
    assert got["two"] == (pytest.approx(n / 5), 4 * n * tt.VOCAB * 5)


def test_sgemm_rate_is_two_n_cubed_over_the_best_time(monkeypatch):
    times = iter([0.4, 0.1, 0.25])
    monkeypatch.setattr(tt, "_timed", lambda fn: next(times))
    assert tt.sgemm_gflops(n=64, repeats=3) == pytest.approx(2 * 64**3 / 0.1 / 1e9)


def transformer_step_flops(a) -> dict[str, int]:
    """Matmul FLOPs of one forward + backward of the bench's Transformer (d_mlp 4d, heads x d/heads):
    6 N (L (4 d^2 + 2 d d_mlp) + d V) for the weights (the embedding's output carries a gradient, so every
    matmul has both backward products), 12 L T d N for QK^T and AV (forward 2 + 2, backward twice that)."""
    n, d, L, T = a.batch * a.seq, a.d_model, a.layers, a.seq
    return {
        "weights": 6 * n * (L * (4 * d * d + 2 * d * 4 * d) + d * tt.VOCAB),
        "attention": 12 * L * T * d * n,
    }


def test_counted_flops_of_our_transformer_are_weights_plus_attention(monkeypatch):
    # forward + backward of every weight matmul and of attention (the fused CPU kernel counts 0: the
    # count runs the math backend), never a forward only, nor a missing layer or unembedding
    a = args(rounds=1, steps=1)
    monkeypatch.setattr(tt, "time", Clock([1.0]))
    (_, flops) = tt.tokens_per_second({"ours": tt.build_ours}, a)["ours"]
    assert flops == sum(transformer_step_flops(a).values())


def test_gflops_row_is_counted_flops_times_steps_per_second(monkeypatch):
    a = args(batch=4, seq=8)  # 32 tokens a step
    rates = {"ours": (64.0, 6e9), "hf_gpt2": (40.0, 5e9), "hf_gpt2_tanh": (32.0, 5e9), "ours_mamba2": (30.0, 1e9),
             "hf_mamba2": (20.0, 1e9)}  # fmt: skip
    sgemm = iter([20.0, 16.0])  # before and after the rounds: the better one is the reference
    monkeypatch.setattr(tt, "sgemm_gflops", lambda: next(sgemm))
    monkeypatch.setattr(tt, "tokens_per_second", lambda builders, a: rates)
    monkeypatch.setattr(tt, "matmul_profile", lambda build, a: (0.5, 10.0))
    training, shipped, mamba, gflops = tt.rows(a)
    assert (shipped["reference_value"], shipped["ratio"], shipped["met"]) == (32.0, 2.0, None)
    # 64 tokens/s over 32 tokens a step = 2 steps/s; 6e9 FLOPs a step -> 12 GFLOP/s, against 20
    assert gflops["value"] == pytest.approx(12.0) and gflops["reference_value"] == 20.0
    assert gflops["ratio"] == pytest.approx(0.6) and gflops["met"] is False and "50%" in gflops["bound"]
    assert (training["value"], training["reference_value"], training["ratio"]) == (64.0, 40.0, pytest.approx(1.6))
    assert training["met"] is True and training["bound"] is None
    assert (mamba["value"], mamba["reference_value"], mamba["ratio"]) == (30.0, 20.0, pytest.approx(1.5))


# --- the references: the same function as ours, same size --------------------------------------------


def gpt2_weights_of(ours: torch.nn.Module, layers: int) -> dict[str, torch.Tensor]:
    """Our Transformer's weights under HF GPT-2's names (HF's Conv1D stores a linear map transposed)."""
    sd = ours.state_dict()
    out = {
        "transformer.wte.weight": sd["embed.weight"],
        "transformer.wpe.weight": sd["pos_embed.weight"],
        "transformer.ln_f.weight": sd["ln_final.weight"],
        "transformer.ln_f.bias": sd["ln_final.bias"],
        "lm_head.weight": sd["unembed.weight"],
    }
    names = {"ln_1": "ln1", "ln_2": "ln2", "attn.c_attn": "attn.qkv", "attn.c_proj": "attn.out"}
    names |= {"mlp.c_fc": "mlp.fc_in", "mlp.c_proj": "mlp.fc_out"}
    for i in range(layers):
        for hf, ours_name in names.items():
            w, b = sd[f"blocks.{i}.{ours_name}.weight"], sd[f"blocks.{i}.{ours_name}.bias"]
            out[f"transformer.h.{i}.{hf}.weight"] = w if hf.startswith("ln") else w.T
            out[f"transformer.h.{i}.{hf}.bias"] = b
    return out


def test_hf_gpt2_is_our_transformer():
    """With our weights copied in, HF GPT-2 (activation "gelu", the exact one) gives our logits and our
    training loss: same size (untied, learned positions, no dropout), same next-token objective. GPT-2 as
    shipped ("gelu_new", tanh) is the second row's reference: with our GELU it differs."""
    a = args(batch=2, seq=8, d_model=16, layers=2, heads=2)
    torch.manual_seed(0)
    ours, ours_loss = tt.build_ours(a)
    hf, hf_loss = tt.build_hf_gpt2(a)
    cfg = hf.config
    assert (cfg.vocab_size, cfg.n_positions, cfg.n_embd, cfg.n_layer, cfg.n_head) == (tt.VOCAB, 8, 16, 2, 2)
    assert (cfg.resid_pdrop, cfg.embd_pdrop, cfg.attn_pdrop) == (0.0, 0.0, 0.0)
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.tie_word_embeddings) == (0, 0, False)  # ids inside |V| = 41
    assert hf.lm_head.weight.data_ptr() != hf.transformer.wte.weight.data_ptr()  # untied, as ours
    n_ours, n_hf = (sum(p.numel() for p in m.parameters()) for m in (ours, hf))
    # embeddings (41 + 8) x 16, per layer 2 layer norms + qkv + out + fc_in + fc_out with biases, final norm,
    # unembedding: 784 + 2 x 3280 + 32 + 656
    assert n_ours == n_hf == 8032
    hf.load_state_dict(gpt2_weights_of(ours, 2), strict=True)
    shipped, _ = tt.build_hf_gpt2(a, "gelu_new")
    shipped.load_state_dict(gpt2_weights_of(ours, 2), strict=True)
    ours.train(), hf.train(), shipped.train()  # the bench trains them: dropout, if any, would act here
    idx = torch.randint(0, tt.VOCAB, (2, 8), generator=torch.Generator().manual_seed(3))
    logits = ours(idx)[0]
    assert torch.allclose(hf(input_ids=idx).logits, logits, atol=1e-6)
    # at init scale (std 0.02) the two GELUs give logits equal to 1e-6; their MLP activations part near |x| ~ 2
    x = torch.linspace(-4, 4, 81)
    assert torch.equal(hf.transformer.h[0].mlp.act(x), F.gelu(x))
    assert (shipped.transformer.h[0].mlp.act(x) - F.gelu(x)).abs().max() > 1e-4
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, tt.VOCAB), idx[:, 1:].reshape(-1))
    assert ours_loss(idx).item() == pytest.approx(expected.item(), abs=1e-6)
    assert hf_loss(idx).item() == pytest.approx(expected.item(), abs=1e-6)
    assert hf_loss(idx).item() == hf_loss(idx).item()  # no dropout between two calls


def test_mamba2_config_is_the_zoo_defaults_at_the_bench_size():
    a = args(layers=3, d_model=64, seq=12)  # none of them the zoo default (4, 128, 128)
    assert tt.mamba2_config(a) == tt.Mamba2Config(n_layers=3, d_model=64, d_vocab=41, n_ctx=12)
    zoo = tt.Mamba2Config()
    cfg = tt.mamba2_config(a)
    assert (cfg.d_state, cfg.head_dim, cfg.expand, cfg.chunk_size) == (zoo.d_state, zoo.head_dim, 2, 64)


def test_hf_mamba2_is_our_mamba2_with_the_same_weights():
    """Ours is HF's blocks under our forward: built from the same seed, the two hold the same weights and
    give the same training loss (HF shifts its labels; ours ignores the last position)."""
    a = args(batch=2, seq=8, d_model=32, layers=2)
    torch.manual_seed(5)
    ours, ours_loss = tt.build_ours_mamba2(a)
    torch.manual_seed(5)
    hf, hf_loss = tt.build_hf_mamba2(a)
    assert ours.config == tt.mamba2_config(a)
    assert (hf.config.hidden_size, hf.config.num_hidden_layers, hf.config.vocab_size) == (32, 2, tt.VOCAB)
    ours_sd, hf_sd = ours.state_dict(), hf.state_dict()
    assert len(ours_sd) == len(hf_sd) == 1 + 9 * 2 + 1 + 1  # embedding, 9 tensors a block, final norm, head
    for (_, w), (_, w_hf) in zip(ours_sd.items(), hf_sd.items()):
        assert torch.equal(w, w_hf)
    ours.train(), hf.train()
    idx = torch.randint(0, tt.VOCAB, (2, 8), generator=torch.Generator().manual_seed(3))
    logits = ours(idx)[0]
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, tt.VOCAB), idx[:, 1:].reshape(-1))
    assert ours_loss(idx).item() == pytest.approx(expected.item(), abs=1e-6)
    assert hf_loss(idx).item() == pytest.approx(expected.item(), abs=1e-6)
    assert ours_loss(idx).requires_grad and hf_loss(idx).requires_grad  # both train


# --- timing and profiling ---------------------------------------------------------------------------


def test_timed_is_the_time_around_one_call(monkeypatch):
    stamps, calls = iter([100.0, 100.25]), []
    monkeypatch.setattr(tt, "time", type("T", (), {"perf_counter": staticmethod(lambda: next(stamps))}))
    assert tt._timed(lambda: calls.append("x")) == 0.25
    assert calls == ["x"]


class FakeProfile:
    """torch.profiler.profile reporting fixed self CPU times (microseconds) per operator."""

    events = [("aten::mm", 300.0), ("aten::addmm", 100.0), ("aten::_scaled_dot_product_flash_attention", 50.0)]
    events += [("aten::gelu", 350.0), ("aten::mm_backward", 150.0), ("aten::bmm", 50.0)]  # 500 of 1000 in kernels
    seen: list = []

    def __init__(self, activities):
        self.seen.append(activities)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def key_averages(self):
        return [SimpleNamespace(key=k, self_cpu_time_total=t) for k, t in self.events]


def test_matmul_profile_share_and_rate_follow_from_the_profile(monkeypatch):
    a = args(batch=2, seq=4, steps=3, warmup=2)
    built, steps = [], []

    def build(arg):
        built.append(arg)
        model, loss_fn = linear_builder(5)(arg)
        built.append((model, loss_fn))
        return model, loss_fn

    real_steps = tt.train_steps

    def train_steps(loss_fn, opt, idx, n):
        steps.append((loss_fn, opt, idx.clone(), n))
        real_steps(loss_fn, opt, idx, n)

    FakeProfile.seen.clear()
    monkeypatch.setattr(tt.torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(tt, "train_steps", train_steps)
    share, rate = tt.matmul_profile(build, a)
    flops = 4 * a.batch * a.seq * tt.VOCAB * 5  # one forward + backward of the one-matmul model
    assert share == 0.5  # mm, addmm, attention, bmm: 500 of 1000 us; mm_backward is not a kernel name
    assert rate == flops * 3 / (500 / 1e6) / 1e9  # 3 profiled steps in 500 us of kernels, in GFLOP/s
    assert FakeProfile.seen == [[torch.profiler.ProfilerActivity.CPU]]
    assert built[0] is a
    model, loss_fn = built[1]
    torch.manual_seed(0)
    idx = torch.randint(0, tt.VOCAB, (2, 4))
    assert [(s[0], s[3]) for s in steps] == [(loss_fn, 2), (loss_fn, 3)]  # warm-up, then timed
    assert all(torch.equal(s[2], idx) for s in steps)
    (opt, opt2) = (s[1] for s in steps)
    assert opt is opt2 and isinstance(opt, torch.optim.AdamW) and opt.param_groups[0]["lr"] == 1e-4
    assert opt.param_groups[0]["params"] == list(model.parameters())


def test_matmul_profile_of_a_real_step_is_a_share_and_a_rate():
    share, rate = tt.matmul_profile(linear_builder(5), args(batch=2, seq=4, steps=2, warmup=1))
    assert 0 < share < 1 and rate > 0  # the profiled step has mm kernels and other ops


# --- main ---------------------------------------------------------------------------------------------


def test_main_prints_each_row_value_reference_and_ratio(monkeypatch, capsys):
    seen = []
    rows = [
        tt.row("training tokens/s (d16)", 27595.4, "tokens/s", "HF", 20688.0, ">= 1.5x"),
        tt.row("training GFLOP/s (d16)", 131.2, "GFLOP/s", "sgemm", 330.0, ">= 0.75x"),
    ]
    monkeypatch.setattr(tt, "rows", lambda a: seen.append(a) or rows)
    monkeypatch.setattr(tt.torch, "set_num_threads", lambda n: seen.append(("threads", n)))
    tt.main(["--steps", "7", "--threads", "3", "--d-model", "16"])
    assert seen[0] == ("threads", 3)
    assert (seen[1].steps, seen[1].d_model, seen[1].threads, seen[1].batch) == (7, 16, 3, 16)
    assert capsys.readouterr().out.splitlines() == [
        "training tokens/s (d16): 27,595 tokens/s vs 20,688: 1.334x",  # 27595.4 / 20688
        "training GFLOP/s (d16): 131 GFLOP/s vs 330: 0.398x",
    ]


def test_main_trains_all_four_models_and_prints_the_three_rows(monkeypatch, capsys):
    monkeypatch.setattr(tt, "sgemm_gflops", lambda: 50.0)  # the 2048^2 reference: seconds, not what is checked
    tt.main(
        ["--batch=2", "--seq=8", "--d-model=32", "--layers=1", "--heads=2"] + ["--steps=1", "--rounds=1", "--threads=1"]
    )
    lines = capsys.readouterr().out.splitlines()
    size = "(d32, 1 layers, seq 8, batch 2)"
    names = [
        "training tokens/s",
        "training tokens/s vs GPT-2 as shipped",
        "Mamba-2 LM training tokens/s",
        "training GFLOP/s, our Transformer",
    ]
    units = ["tokens/s", "tokens/s", "tokens/s", "GFLOP/s"]
    assert len(lines) == 4
    for line, name, unit in zip(lines, names, units):
        got = re.fullmatch(rf"{re.escape(f'{name} {size}')}: ([\d,]+) {unit} vs ([\d,]+): ([\d.]+)x", line)
        assert got, line
        value, reference, ratio = (float(g.replace(",", "")) for g in got.groups())
        # measured here: numbers only (test_rows_from_measured_rates_by_hand checks the ratio exactly)
        assert all(math.isfinite(x) for x in (value, reference, ratio))
        if unit == "GFLOP/s":
            assert reference == 50.0  # the sgemm rate


def test_rows_from_measured_rates_by_hand(monkeypatch):
    """The four rows from stand-in measurements: training tokens/s against HF GPT-2 (1.2x, target missed),
    against GPT-2 as shipped (no target), Mamba-2 against HF's, and achieved GFLOP/s = counted FLOPs per
    step x steps/s against the better of two sgemm samples; a missed target carries the profiler's
    evidence as its bound."""
    a = args(batch=2, seq=8, d_model=16, layers=2)  # 16 tokens a step
    sgemm = iter([100.0, 120.0])
    monkeypatch.setattr(tt, "sgemm_gflops", lambda: next(sgemm))
    rates = {"ours": (1200.0, 4 * 10**8), "hf_gpt2": (1000.0, 1), "hf_gpt2_tanh": (800.0, 1),
             "ours_mamba2": (300.0, 1), "hf_mamba2": (200.0, 1)}  # fmt: skip
    timed = {}

    def tokens_per_second(builders, a):
        timed.update(builders)
        return {n: rates[n] for n in builders}

    monkeypatch.setattr(tt, "tokens_per_second", tokens_per_second)
    monkeypatch.setattr(tt, "matmul_profile", lambda build, a: (0.4, 60.0) if build is tt.build_ours else None)
    size = "d16, 2 layers, seq 8, batch 2"
    evidence = (
        "40% of our step's CPU time is in matmul/attention kernels, which run at 60 GFLOP/s (0.50x the 2048^2 "
        "sgemm): small (16 x 16) matmuls, plus elementwise ops, layer norms and AdamW outside them "
        "(torch.profiler, same run)"
    )
    training, shipped, mamba, gflops = tt.rows(a)
    assert training == {
        **tt.row(f"training tokens/s ({size})", 1200.0, "tokens/s",
                 "HF GPT2LMHeadModel, same function (exact GELU, untied, learned positions, no dropout), same size, "
                 "same run", 1000.0, ">= 1.5x"),
        "bound": evidence,
    }  # fmt: skip
    assert shipped == tt.row(
        f"training tokens/s vs GPT-2 as shipped ({size})",
        1200.0,
        "tokens/s",
        "HF GPT2LMHeadModel with GPT-2's tanh GELU (gelu_new): a different function, same size, same run",
        800.0,
    )  # no target: a ratio against another function is not a lead
    assert mamba == tt.row(
        f"Mamba-2 LM training tokens/s ({size})",
        300.0,
        "tokens/s",
        "HF Mamba2ForCausalLM, same blocks, same run",
        200.0,
    )
    achieved = 4e8 * 1200.0 / 16 / 1e9  # 30 GFLOP/s
    assert gflops == {
        **tt.row(f"training GFLOP/s, our Transformer ({size})", achieved, "GFLOP/s",
                 "float32 2048^2 sgemm, same threads, same run", 120.0, ">= 0.75x"),
        "bound": evidence,
    }  # fmt: skip
    assert gflops["value"] == 30.0 and gflops["met"] is False
    # each row times the function it names: exact GELU for "same function", GPT-2's tanh GELU for "as shipped"
    assert timed["hf_gpt2"](a)[0].config.activation_function == "gelu"
    assert timed["hf_gpt2_tanh"](a)[0].config.activation_function == "gelu_new"
    assert timed["ours"] is tt.build_ours and timed["hf_mamba2"] is tt.build_hf_mamba2


def test_sgemm_times_an_n_by_n_product_best_of_repeats(monkeypatch):
    shapes = []
    monkeypatch.setattr(tt, "_timed", lambda fn: shapes.append(tuple(fn().shape)) or 0.5)
    assert tt.sgemm_gflops(n=64, repeats=3) == 2 * 64**3 / 0.5 / 1e9
    assert shapes == [(64, 64)] * 3
    shapes.clear()
    tt.sgemm_gflops()  # the defaults the rows name: 2048^2, best of 5
    assert shapes == [(2048, 2048)] * 5


def test_tokens_per_second_trains_each_model_with_adamw_on_seeded_tokens(monkeypatch):
    made = []

    class AdamW(torch.optim.AdamW):
        def __init__(self, params, **kw):
            made.append(kw)
            super().__init__(params, **kw)

    monkeypatch.setattr(tt.torch.optim, "AdamW", AdamW)
    seen = []
    model = torch.nn.Linear(1, 1)
    monkeypatch.setattr(tt, "step_flops", lambda loss_fn, idx: seen.append(idx.clone()) or 0)
    tt.tokens_per_second({"m": lambda a: (model, lambda idx: model.weight.sum() * 0 + idx.float().mean())}, args())
    torch.manual_seed(0)
    assert made == [{"lr": 1e-4}] and torch.equal(seen[0], torch.randint(0, tt.VOCAB, (2, 8)))
