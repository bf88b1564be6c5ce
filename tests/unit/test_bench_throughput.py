"""The training-throughput bench's measuring functions on tiny inputs, against values derived by hand:
the FLOPs it counts for a step, the reference sgemm rate, tokens/s as a median over rounds, and the
achieved GFLOP/s row. Clocks are replaced by scripted ones so every rate is exact."""

from __future__ import annotations

import itertools

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
    rates = {"ours": (64.0, 6e9), "hf_gpt2": (40.0, 5e9), "ours_mamba2": (30.0, 1e9), "hf_mamba2": (20.0, 1e9)}
    sgemm = iter([20.0, 16.0])  # before and after the rounds: the better one is the reference
    monkeypatch.setattr(tt, "sgemm_gflops", lambda: next(sgemm))
    monkeypatch.setattr(tt, "tokens_per_second", lambda builders, a: rates)
    monkeypatch.setattr(tt, "matmul_profile", lambda build, a: (0.5, 10.0))
    training, mamba, gflops = tt.rows(a)
    # 64 tokens/s over 32 tokens a step = 2 steps/s; 6e9 FLOPs a step -> 12 GFLOP/s, against 20
    assert gflops["value"] == pytest.approx(12.0) and gflops["reference_value"] == 20.0
    assert gflops["ratio"] == pytest.approx(0.6) and gflops["met"] is False and "50%" in gflops["bound"]
    assert (training["value"], training["reference_value"], training["ratio"]) == (64.0, 40.0, pytest.approx(1.6))
    assert training["met"] is True and training["bound"] is None
    assert (mamba["value"], mamba["reference_value"], mamba["ratio"]) == (30.0, 20.0, pytest.approx(1.5))
