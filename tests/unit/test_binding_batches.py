"""Training formats, evaluation encoding, the batch sampler and prediction read-out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import refuses

from emergence.core.io import PipelineError
from emergence.studies.binding.batches import (
    IGNORE,
    encode_programs,
    line_values,
    parse_program,
    predict_answers,
    sampler,
)
from emergence.studies.binding.interpreter import run_program
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import generate_table
from emergence.studies.binding.stream import stream_sampler
from emergence.studies.binding.stress import stress_accuracy
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.train_config import Stream, stream_programs

TOK = CharTokenizer()


def test_parse_and_line_values_follow_python_semantics():
    lines, query = parse_program("a=1\nb=a\na=2\nc=b\n#c:")
    assert query == "c" and lines[2] == ("a", "2")
    assert line_values(lines) == [1, 1, 2, 1]


@pytest.mark.parametrize("bad", ["a=1\nb=a", "a=1\nbb=a\n#b:", "a:1\n#a:"])
def test_parse_rejects_malformed_programs(bad):
    with pytest.raises(PipelineError, match="program"):
        parse_program(bad)


def test_answer_only_has_one_target_at_the_final_colon():
    enc = encode_programs(["a=3\n#a:", "a=1\nb=a\n#b:"], [3, 1], TOK)
    assert enc.idx.shape == (2, 11)
    for i, text in enumerate(["a=3\n#a:", "a=1\nb=a\n#b:"]):
        assert TOK.decode(enc.idx[i].tolist()) == text
        (where,) = torch.nonzero(enc.targets[i] != IGNORE, as_tuple=True)
        assert where.tolist() == [len(text) - 1] == [enc.answer_pos[i].item()]
    assert enc.targets[1, 10].item() == TOK.digit_ids[1]


def test_line_values_adds_one_target_per_newline_and_keeps_inputs():
    text = "a=4\nb=a\na=7\n#b:"
    plain = encode_programs([text], [4], TOK)
    dense = encode_programs([text], [4], TOK, "line_values")
    assert torch.equal(plain.idx, dense.idx)
    targets = {p: TOK.vocab[t] for p, t in enumerate(dense.targets[0].tolist()) if t != IGNORE}
    assert targets == {3: "4", 7: "4", 11: "7", 14: "4"}


def test_unknown_format_names_the_key():
    with pytest.raises(PipelineError, match="binding_train.format"):
        encode_programs(["a=1\n#a:"], [1], TOK, "scratchpad")


def test_sampler_is_a_pure_function_of_seed_and_step():
    df = generate_table(np.random.default_rng(0), ProgramConfig(n_lines=4, max_hops=2), 50, set_name="main")
    data = encode_programs(df["program"], df["answer"], TOK, "line_values")
    a, b = sampler(data, 8, seed=3), sampler(data, 8, seed=3)
    assert torch.equal(a(5)[0], b(5)[0]) and torch.equal(a(5)[1], b(5)[1])
    assert not torch.equal(a(5)[0], a(6)[0])
    assert not torch.equal(a(5)[0], sampler(data, 8, seed=4)(5)[0])


def _decode(idx: torch.Tensor) -> list[str]:
    return ["".join(TOK.vocab[t] for t in row if t != TOK.pad_id) for row in idx.tolist()]


def test_stream_draws_fresh_programs_per_step_and_never_a_held_out_one():
    cfg = ProgramConfig(distribution="paper", n_lines=4, max_hops=2)
    a, b = (
        stream_sampler(cfg, "line_values", TOK, 8, 3, frozenset()),
        stream_sampler(cfg, "line_values", TOK, 8, 3, frozenset()),
    )
    assert torch.equal(a(5)[0], b(5)[0]) and torch.equal(a(5)[1], b(5)[1])  # resumable: (seed, step) -> batch
    assert _decode(a(5)[0]) != _decode(a(6)[0])
    texts = _decode(a(5)[0])
    assert all(text.count("\n") == 4 and text.endswith(":") for text in texts)
    assert (a(5)[1] != IGNORE).sum(1).tolist() == [5] * 8  # line_values: 4 lines + the answer
    held = stream_sampler(cfg, "line_values", TOK, 8, 3, frozenset(texts[:4]))
    assert not set(_decode(held(5)[0])) & set(texts[:4])  # redrawn, not kept


class _Oracle(torch.nn.Module):
    """Puts all mass on a fixed token at every position."""

    def __init__(self, token: int):
        super().__init__()
        self.token = token
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, idx, targets=None):
        logits = torch.zeros(*idx.shape, len(TOK))
        logits[..., self.token] = 1.0
        return logits, None


def test_predict_answers_reads_the_answer_position_and_flags_non_digits():
    enc = encode_programs(["a=3\n#a:", "a=1\nb=a\n#b:"], [3, 1], TOK)
    assert predict_answers(_Oracle(TOK.digit_ids[7]), enc, TOK, batch_size=1).tolist() == [7, 7]
    assert predict_answers(_Oracle(TOK.encode("=")[0]), enc, TOK).tolist() == [-1, -1]


def test_the_stream_can_weight_hops_otherwise_than_the_evaluation_sets():
    paper = ProgramConfig(distribution="paper")  # (h+1)^3: 0 hops 0.4 %, 4 hops 56 %
    assert stream_programs(paper, Stream(True, None)) == paper
    uniform = stream_programs(paper, Stream(True, 0))
    assert uniform.hop_weight_power == 0.0 and uniform.distribution == "paper"
    batch = stream_sampler(uniform, "answer_only", TOK, 500, 0, frozenset())(0)[0]
    hops = [run_program(text)[1] for text in _decode(batch)]
    assert np.bincount(hops, minlength=5).min() > 70  # ~100 each, where the cubic prior gives ~2 zero-hop


def _deepest_wrong_chain(text: str) -> int:
    """Copies behind the deepest value in the program that is not the answer (-1: none), by hand."""
    *lines, query = text.split("\n")
    value, depth, best = {}, {}, -1
    for lhs, rhs in (line.split("=") for line in lines):
        value[lhs], depth[lhs] = (rhs, 0) if rhs.isdigit() else (value[rhs], depth[rhs] + 1)
    answer = value[query[1:-1]]
    return max((depth[v] for v in value if value[v] != answer), default=best)


def test_the_stream_can_plant_a_distractor_chain_the_evaluation_sets_lack():
    paper = ProgramConfig(distribution="paper", min_hops=4)  # 4-hop programs only
    planted = stream_programs(paper, Stream(True, None, "planted"))
    assert (planted.distractor, paper.distractor) == ("planted", "natural")
    assert stream_programs(paper, Stream(True, None, None)) == paper
    deep = {}
    for cfg in (paper, planted):
        texts = _decode(stream_sampler(cfg, "answer_only", TOK, 400, 0, frozenset())(0)[0])
        deep[cfg.distractor] = np.mean([_deepest_wrong_chain(t) >= 3 for t in texts])
    assert deep["natural"] < 0.15 and deep["planted"] > 0.3, deep  # measured ~0.09 vs ~0.4


def test_stress_accuracy_counts_right_answers_per_set_lines_and_hops():
    programs = pd.DataFrame(
        {
            "set": ["t", "s", "s", "s"],  # not in order: the table is sorted by set, lines, hops
            "program": ["a=1\n#a:", "a=7\nb=a\n#b:", "a=7\n#a:", "a=3\n#a:"],
            "answer": [1, 7, 7, 3],
            "n_lines": [1, 2, 1, 1],
            "hops": [0, 1, 0, 0],
        }
    )
    table = stress_accuracy(_Oracle(TOK.digit_ids[7]), programs, seed=3, step=50)  # answers 7 to all
    rows = {(r.set, r.n_lines, r.hops): (r.n, r.correct, r.accuracy) for r in table.itertuples()}
    assert rows == {("s", 1, 0): (2, 1, 0.5), ("s", 2, 1): (1, 1, 1.0), ("t", 1, 0): (1, 0, 0.0)}
    assert (table["seed"] == 3).all() and (table["step"] == 50).all()
    assert table[["set", "n_lines", "hops"]].values.tolist() == [["s", 1, 0], ["s", 2, 1], ["t", 1, 0]]
    assert table["correct"].dtype == np.int64 and table["n"].dtype == np.int64  # counts, not floats


class _PositionDigit(torch.nn.Module):
    """Predicts the digit (t mod 10) at position t whatever the input, so every position, and
    the padded last column, reads as a different digit: a read-out one position off shows."""

    def __init__(self):
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        digits = torch.tensor(TOK.digit_ids)[torch.arange(T) % 10]  # (T,)
        logits = torch.nn.functional.one_hot(digits, len(TOK)).float()  # (T, V)
        return logits.expand(idx.shape[0], T, len(TOK)), None


def test_predict_answers_reads_each_programs_own_final_colon():
    texts = ["a=3\n#a:", "a=1\nb=a\n#b:", "a=1\nb=a\nc=b\n#c:"]  # lengths 7, 11, 15: padded to 15
    enc = encode_programs(texts, [3, 1, 1], TOK)
    # By hand: the ':' sits at positions 6, 10, 14 -> digits 6, 0, 4. Position +1 would give
    # 7, 1, (out of range); -1 gives 5, 9, 3; the last column gives 4 for every program.
    for batch_size in (1, 2, 256):  # 2: the second batch must use its own answer positions
        assert predict_answers(_PositionDigit(), enc, TOK, batch_size=batch_size).tolist() == [6, 0, 4]


def test_a_stream_that_cannot_avoid_the_evaluation_sets_says_so():
    cfg = ProgramConfig(distribution="paper", n_lines=1, max_hops=0)  # only 'x=d' programs: 260 of them
    every = frozenset(f"{v}={d}\n#{v}:" for v in "abcdefghijklmnopqrstuvwxyz" for d in range(10))
    with refuses("binding_train.stream", "step 3", "200 programs", "only 0"):
        stream_sampler(cfg, "answer_only", TOK, 2, 0, every)(3)
