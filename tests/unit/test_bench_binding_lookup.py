"""bench/binding_lookup.py, the diagnostic that trains and prints curves: its flags; the training pool
(line counts uniform in --lines, hops capped by the lines); the line kinds; the pure-lookup control's
programs and targets; the curriculum's growing line cap; the model and the training setting it hands the
loop; and the printed curves, with a model whose every prediction is known (tests/unit/binding_oracle.py)
trained in its place, worked out again from the programs it was scored on. A scripted clock gives the
seconds column."""

from __future__ import annotations

import argparse
import re
import string
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from binding_oracle import SEEN, TOK, TRAINED, lines_of, oracle, trace
from conftest import help_text, summary_line

from bench import binding_lookup as lookup
from emergence.core.models.transformer_config import TransformerConfig
from emergence.studies.binding.batches import EncodedPrograms, sampler

WRONG = "aeiouwxyz"


def hops_of(text: str) -> int:
    lines, query = lines_of(text)
    return len(trace(lines, query)[1]) - 1


# --- parse_args ------------------------------------------------------------


DEFAULTS = {
    "steps": 3000, "batch": 32, "lr": 1e-3, "warmup": 300, "lines": (16, 16), "ramp": 0, "max_hops": 4,
    "pool": 20000, "format": "line_values", "layers": 6, "d_model": 64, "heads": 4, "pos": "rope", "conv": 4,
    "eval_every": 250, "eval_programs": 500, "control": 0, "threads": 1, "seed": 0,
}  # fmt: skip


def test_defaults_are_the_embedded_default_model_on_16_line_programs():
    assert vars(lookup.parse_args([])) == DEFAULTS


def test_flags():
    argv = "--steps 7 --batch 5 --lr 0.25 --warmup 2 --lines 2 9 --ramp 11 --max-hops 3 --pool 13 --format answer_only"
    argv += " --layers 1 --d-model 24 --heads 3 --pos learned --conv 0 --eval-every 6 --eval-programs 17"
    argv += " --control 8 --threads 2 --seed 4"
    got = vars(lookup.parse_args(argv.split()))
    assert got == {
        "steps": 7, "batch": 5, "lr": 0.25, "warmup": 2, "lines": [2, 9], "ramp": 11, "max_hops": 3, "pool": 13,
        "format": "answer_only", "layers": 1, "d_model": 24, "heads": 3, "pos": "learned", "conv": 0,
        "eval_every": 6, "eval_programs": 17, "control": 8, "threads": 2, "seed": 4,
    }  # fmt: skip
    assert all(type(got[k]) is type(v) for k, v in DEFAULTS.items() if k != "lines")


def test_help_names_every_flag_and_says_what_the_unusual_ones_do(capsys):
    out = help_text(lambda: lookup.parse_args(["--help"]), capsys)
    assert summary_line(lookup) in out
    assert "--lines MIN MAX" in out and "--control K pure-lookup control with K lines" in out
    assert "--ramp RAMP curriculum: the longest program allowed grows from MIN to MAX lines over this many steps" in out
    assert "--pool POOL training programs (sampled with replacement)" in out
    assert "--conv CONV conv_kernel (0 = plain GPT-2)" in out
    for flag in ("steps", "batch", "lr", "warmup", "max-hops", "format", "layers", "d-model", "heads", "pos"):
        assert f"--{flag} {flag.replace('-', '_').upper()}" in out
    for flag in ("eval-every", "eval-programs", "threads", "seed"):
        assert f"--{flag} {flag.replace('-', '_').upper()}" in out


# --- programs, line_kinds --------------------------------------------------


def test_programs_draws_line_counts_uniformly_in_the_range_and_caps_hops_by_the_lines():
    progs = lookup.programs(np.random.default_rng(0), 400, (2, 5), 3)
    counts = Counter(len(p.lines) for p in progs)
    assert sorted(counts) == [2, 3, 4, 5] and all(70 < c < 130 for c in counts.values())
    hops = [(len(p.lines), hops_of(p.text)) for p in progs]
    assert all(h <= min(3, n - 1) for n, h in hops)
    assert (2, 1) in hops and (5, 3) in hops  # a 2-line program can copy; 3 hops (the cap) fit in 5 lines
    assert len({p.text for p in progs}) > 300


def test_line_kinds_tell_constants_from_copies_of_a_variable_written_once_or_more():
    prog = SimpleNamespace(lines=[("a", "1"), ("b", "a"), ("a", "2"), ("c", "a"), ("d", "b"), ("b", "7"), ("e", "b")])
    assert lookup.line_kinds(prog) == ["const", "copy1", "const", "copyN", "copy1", "const", "copyN"]


# --- control_batch ---------------------------------------------------------


def test_control_programs_are_k_distinct_constants_then_4_answered_queries_with_a_target_at_each_colon():
    idx, targets = lookup.control_batch(np.random.default_rng(1), 300, 6, TOK)
    assert idx.shape == targets.shape == (300, 6 * 4 + 4 * 5 - 1) and idx.dtype == torch.long
    values_seen, queried = Counter(), Counter()
    for row, target in zip(idx, targets):
        text = TOK.decode(row.tolist())
        lines = text.split("\n")
        assert len(lines) == 10
        assigned = dict(line.split("=") for line in lines[:6])
        assert len(assigned) == 6 and set(assigned) <= set(string.ascii_lowercase)
        assert all(len(v) == 1 and v.isdigit() for v in assigned.values())
        for q in lines[6:]:
            assert re.fullmatch(r"#[a-z]:\d", q) and assigned[q[1]] == q[3]
            queried[list(assigned).index(q[1])] += 1
        colons = [i for i, ch in enumerate(text) if ch == ":"]
        assert target.tolist() == [TOK.encode(text[i + 1])[0] if i in colons else -1 for i in range(len(text))]
        values_seen.update(assigned.values())
    assert sorted(values_seen) == list(string.digits)  # every digit a value
    assert sorted(queried) == list(range(6))  # every line queried, the first and the last too


# --- curriculum ------------------------------------------------------------


def rows(n: int) -> EncodedPrograms:
    """n programs whose token ids say which row they are."""
    ids = torch.arange(n)
    return EncodedPrograms(ids[:, None].repeat(1, 3), -ids[:, None].repeat(1, 3), ids * 0, ids * 0)


N_LINES = np.array([4, 5, 6, 7, 8, 9, 10, 11, 12] * 3)


def drawn_lengths(batch_fn, step: int) -> set[int]:
    idx, targets = batch_fn(step)
    assert idx.shape == (300, 3) and torch.equal(targets, -idx)
    return {int(N_LINES[i]) for i in idx[:, 0]}


def test_curriculum_grows_the_longest_program_from_min_to_max_lines_over_ramp_steps():
    a = argparse.Namespace(ramp=8, lines=(4, 12), batch=300, seed=3)
    batch_fn = lookup.curriculum(rows(27), N_LINES, a)
    assert drawn_lengths(batch_fn, 0) == {4}
    assert drawn_lengths(batch_fn, 2) == {4, 5, 6}  # 4 + 8 * 2/8
    assert drawn_lengths(batch_fn, 5) == set(range(4, 10))  # 4 + 8 * 5/8
    assert drawn_lengths(batch_fn, 8) == drawn_lengths(batch_fn, 30) == set(range(4, 13))


def test_curriculum_batches_are_a_function_of_seed_and_step():
    a = argparse.Namespace(ramp=8, lines=(4, 12), batch=300, seed=3)
    batch_fn = lookup.curriculum(rows(27), N_LINES, a)
    assert torch.equal(batch_fn(9)[0], batch_fn(9)[0])
    assert not torch.equal(batch_fn(9)[0], batch_fn(10)[0])
    other = lookup.curriculum(rows(27), N_LINES, argparse.Namespace(ramp=8, lines=(4, 12), batch=300, seed=4))
    assert not torch.equal(batch_fn(9)[0], other(9)[0])


def test_without_a_ramp_every_program_is_drawn_from_the_start():
    a = argparse.Namespace(ramp=0, lines=(4, 12), batch=300, seed=3)
    data = rows(27)
    batch_fn = lookup.curriculum(data, N_LINES, a)
    assert drawn_lengths(batch_fn, 0) == set(range(4, 13))
    for step in (0, 5):
        assert all(torch.equal(x, y) for x, y in zip(batch_fn(step), sampler(data, 300, 3)(step)))


# --- build, run ------------------------------------------------------------


def test_build_makes_the_transformer_the_flags_describe_seeded():
    a = argparse.Namespace(layers=2, d_model=24, heads=3, pos="learned", conv=3, seed=5)
    model = lookup.build(a, TOK)
    assert model.config == TransformerConfig(
        n_layers=2, d_model=24, n_heads=3, d_head=8, d_mlp=96, n_ctx=128, d_vocab=len(TOK), pos="learned",
        act="gelu", dropout=0.0, conv_kernel=3,
    )  # fmt: skip
    again, other = lookup.build(a, TOK), lookup.build(argparse.Namespace(**{**vars(a), "seed": 6}), TOK)
    weights = [dict(m.state_dict()) for m in (model, again, other)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert not all(torch.equal(weights[0][k], weights[2][k]) for k in weights[0])


def test_run_trains_with_the_flags_setting_in_a_folder_it_removes(monkeypatch):
    calls = []

    def fake_train(model, batch_fn, cfg, out_dir, scratch_dir, *, eval_fn, progress):
        calls.append((model, batch_fn, cfg, Path(out_dir), Path(scratch_dir), eval_fn, progress))
        assert Path(out_dir).parent.is_dir() and Path(out_dir).parent == Path(scratch_dir).parent
        assert not Path(out_dir).exists()

    monkeypatch.setattr(lookup, "train", fake_train)
    a = argparse.Namespace(steps=17, batch=5, lr=0.25, warmup=3, seed=4, eval_every=6)
    model, batch_fn, eval_fn = object(), object(), object()
    lookup.run(a, model, batch_fn, eval_fn)
    ((m, b, cfg, out_dir, scratch_dir, e, progress),) = calls
    assert (m, b, e, progress) == (model, batch_fn, eval_fn, False)
    assert (cfg.steps, cfg.batch_size, cfg.lr, cfg.warmup_steps, cfg.seed, cfg.eval_every) == (17, 5, 0.25, 3, 4, 6)
    assert (cfg.weight_decay, cfg.schedule, cfg.n_log_checkpoints, cfg.device) == (0.01, "linear", 0, "cpu")
    assert out_dir.name != scratch_dir.name and not out_dir.parent.exists()  # the temporary folder is gone


# --- main ------------------------------------------------------------------


class Terminal:
    """sys.stdout that checks each line is flushed before anything else is written (live curves)."""

    def __init__(self) -> None:
        self.text, self.flushed = "", 0

    def write(self, s: str) -> int:
        assert self.flushed == self.text.count("\n"), f"not flushed: {self.text.splitlines()[-1]!r}"
        self.text += s
        return len(s)

    def flush(self) -> None:
        self.flushed = self.text.count("\n")

    def lines(self) -> list[str]:
        assert self.flushed == self.text.count("\n")
        return self.text.splitlines()


class Clock:
    """time.time() that moves 7 s a call."""

    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        self.now += 7.0
        return self.now


BUILT: list[tuple[dict, object]] = []  # what build was given, per main run
METRICS: list = []  # what the training loop returned


@pytest.fixture
def run_main(monkeypatch):
    """main(argv) with the oracle trained in place of the Transformer; (printed lines, its set threads)."""
    train = lookup.train

    def go(argv: str, wrong: str = WRONG) -> tuple[list[str], list[int]]:
        SEEN.clear()
        TRAINED.clear()
        BUILT.clear()
        METRICS.clear()
        term, threads = Terminal(), []
        monkeypatch.setattr(lookup, "build", lambda a, tok: BUILT.append((vars(a), tok)) or oracle(wrong))
        monkeypatch.setattr(lookup, "train", lambda *args, **kw: METRICS.append(train(*args, **kw)))
        monkeypatch.setattr(lookup, "time", Clock())
        monkeypatch.setattr(torch, "set_num_threads", threads.append)
        monkeypatch.setattr(sys, "stdout", term)
        try:
            lookup.main(argv.split())
        finally:
            monkeypatch.setattr(sys, "stdout", sys.__stdout__)
        return term.lines(), threads

    yield go
    SEEN.clear()
    TRAINED.clear()


def built_from(argv: str) -> bool:
    """build was given the parsed flags and the tokenizer."""
    ((a, tok),) = BUILT
    return a == vars(lookup.parse_args(argv.split())) and isinstance(tok, type(TOK))


def recorded(accuracies: list[str]) -> bool:
    """The training run records each evaluation's answer accuracy as its metric."""
    (metrics,) = METRICS
    got = metrics["accuracy"].dropna().tolist()
    return len(got) == len(accuracies) and all(abs(g - float(a)) <= 5e-4 for g, a in zip(got, accuracies))


def aligned(header: str, row: str) -> bool:
    """Each header label ends where its column's values end."""
    ends = [m.end() for m in re.finditer(r"\S+", header)]
    return ends == [m.end() for m in re.finditer(r"\S+", row)]


def mean_or_nan(values: list[bool]) -> float:
    return float(np.mean(values)) if values else float("nan")


def check_eval_row(row: str, step: int, seconds: int, texts: list[str], kinds_texts: list[str]) -> None:
    cells = row.split()
    assert (int(cells[0]), int(cells[1])) == (step, seconds)
    hits = [lines_of(t)[1] not in WRONG for t in texts]
    hops = [hops_of(t) for t in texts]
    assert float(cells[2]) == pytest.approx(round(float(np.mean(hits)), 3), abs=1e-9)
    by_hop = [mean_or_nan([ok for ok, h in zip(hits, hops) if h == k]) for k in range(5)]
    kinds: dict[str, list[bool]] = {"const": [], "copy1": [], "copyN": []}
    for text in kinds_texts:
        writes: Counter = Counter()
        for lhs, rhs in lines_of(text)[0]:
            kind = "const" if rhs.isdigit() else ("copy1" if writes[rhs] == 1 else "copyN")
            kinds[kind].append(lhs not in WRONG)
            writes[lhs] += 1
    want = [*by_hop, *(mean_or_nan(v) for v in kinds.values())]
    got = [float(c) for c in cells[3:]]
    assert len(got) == 8
    assert all((np.isnan(w) and np.isnan(g)) or g == pytest.approx(round(w, 2), abs=1e-9) for g, w in zip(got, want))


HEADER = ["step", "s", "acc", "h0", "h1", "h2", "h3", "h4", "const", "copy1", "copyN"]


def test_main_prints_held_out_accuracy_by_hop_and_line_kind_at_every_evaluation(run_main):
    argv = "--steps 3 --eval-every 2 --pool 5 --eval-programs 210 --batch 8 --lines 3 6 --max-hops 2 --seed 1"
    argv += " --warmup 1 --threads 2"
    out, threads = run_main(argv)
    assert threads == [2] and built_from(argv)
    header, *rows = out
    assert header.split() == HEADER and len(rows) == 3
    assert all(aligned(header, row) for row in rows)
    assert len(SEEN) == 6  # each evaluation scores the answers, then the lines
    held_out = SEEN[0]
    assert held_out == [p.text for p in lookup.programs(np.random.default_rng(10_001), 210, (16, 16), 4)]
    assert len(held_out) == 210 and all(len(lines_of(t)[0]) == 16 and hops_of(t) <= 4 for t in held_out)
    assert {hops_of(t) for t in held_out} == set(range(5))
    for k, (row, step) in enumerate(zip(rows, (0, 2, 3))):
        assert SEEN[2 * k] == held_out and SEEN[2 * k + 1] == held_out[:200]
        check_eval_row(row, step, 7 * (k + 1), held_out, held_out[:200])
    assert any(0 < float(x) < 1 for x in rows[0].split()[2:])  # right and wrong predictions both
    assert len(TRAINED) == 3  # steps 0, 1, 2
    pool = set()
    for idx, targets in TRAINED:
        assert idx.shape[0] == 8
        for row, target in zip(idx, targets):
            text = TOK.decode(row.tolist())
            lines, _ = lines_of(text)
            assert 3 <= len(lines) <= 6 and hops_of(text) <= min(2, len(lines) - 1)
            assert int((target >= 0).sum()) == len(lines) + 1  # line_values: every newline and the answer
            pool.add(text)
    assert len(pool) == 5
    assert recorded([row.split()[2] for row in rows])
    batches = [idx for idx, _ in TRAINED]
    run_main(argv)
    assert all(torch.equal(a, b) for a, b in zip(batches, (idx for idx, _ in TRAINED)))  # the pool: the seed's


@pytest.mark.filterwarnings("error::RuntimeWarning")  # an empty hop class is nan, not a mean of nothing
def test_main_ramps_trains_on_the_format_asked_and_keeps_its_held_out_set_per_seed(run_main):
    argv = "--steps 2 --eval-every 5 --pool 40 --eval-programs 12 --batch 30 --lines 3 8 --ramp 4 --seed 2"
    out, threads = run_main(argv + " --warmup 0 --format answer_only")
    assert threads == [1]
    header, *rows = out
    assert header.split() == HEADER and [int(r.split()[0]) for r in rows] == [0, 2]
    held_out = SEEN[0]
    hops = {hops_of(t) for t in held_out}
    assert not hops >= {0, 1, 2, 3, 4}  # an empty hop class: nan
    check_eval_row(rows[0], 0, 7, held_out, held_out)
    first, second = (TOK_texts(idx) for idx, _ in TRAINED)
    assert {len(lines_of(t)[0]) for t in first} == {3}  # step 0 of the ramp: the shortest programs only
    assert max(len(lines_of(t)[0]) for t in second) > 3
    assert all(int((target >= 0).sum()) == 1 for _, targets in TRAINED for target in targets)  # the answer only
    other = "--steps 1 --eval-every 5 --pool 9 --eval-programs 12 --batch 2 --warmup 0"
    run_main(other + " --lines 5 5 --max-hops 1 --seed 2")
    assert SEEN[0] == held_out  # the held-out set: 16-line programs of the seed, whatever the training pool
    run_main(other + " --lines 3 8 --seed 3")
    assert SEEN[0] != held_out


def TOK_texts(idx: torch.Tensor) -> list[str]:  # noqa: N802
    return [TOK.decode(row.tolist()) for row in idx]


def test_control_prints_the_query_accuracy_on_fresh_lookup_programs(run_main):
    argv = "--control 5 --steps 3 --eval-every 2 --eval-programs 12 --batch 4 --seed 1 --warmup 1"
    out, threads = run_main(argv)
    assert threads == [1] and built_from(argv)
    header, *rows = out
    assert header.split() == ["step", "s", "acc"] and all(aligned(header, r) for r in rows)
    assert len(SEEN) == 3 and SEEN[0] == SEEN[1] == SEEN[2]
    tests = SEEN[0]
    idx, _ = lookup.control_batch(np.random.default_rng(10_001), 12, 5, TOK)
    assert tests == TOK_texts(idx)  # fresh programs of seed 10,000 + the seed
    assert len(tests) == 12 and all(len(t.split("\n")) == 9 for t in tests)
    queries = [q[1] for t in tests for q in t.split("\n")[5:]]
    acc = round(float(np.mean([q not in WRONG for q in queries])), 3)
    assert 0 < acc < 1
    for k, (row, step) in enumerate(zip(rows, (0, 2, 3))):
        assert row.split() == [str(step), str(7 * (k + 1)), f"{acc:.3f}"]
    trained = [t for idx, _ in TRAINED for t in TOK_texts(idx)]
    assert len(TRAINED) == 3 and len(trained) == 12 and all(len(t.split("\n")) == 9 for t in trained)
    assert not set(trained) & set(tests)
    assert all(int((target >= 0).sum()) == 4 for _, targets in TRAINED for target in targets)
    assert recorded([row.split()[2] for row in rows])
    first = TRAINED[0][0]
    run_main("--control 5 --steps 1 --eval-every 5 --eval-programs 12 --batch 4 --seed 1 --warmup 0")
    assert SEEN[0] == tests and torch.equal(TRAINED[0][0], first)  # a batch: a function of seed and step
    run_main("--control 5 --steps 1 --eval-every 5 --eval-programs 12 --batch 4 --seed 2 --warmup 0")
    assert SEEN[0] != tests
