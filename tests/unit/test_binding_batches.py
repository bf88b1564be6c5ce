"""Program parsing and its messages, the training formats and the targets they set (derived by hand), the
batch sampler's draws (recomputed), the training stream, the prediction read-out, stress accuracy, and the
programs artifact written and read back (schema, row ids, the subset picked)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import assert_refused, refuses

from emergence.core.io import PipelineError, write_parquet
from emergence.studies.binding.batches import (
    IGNORE,
    encode_programs,
    line_values,
    parse_program,
    predict_answers,
    sampler,
)
from emergence.studies.binding.heuristics import HEURISTICS
from emergence.studies.binding.interpreter import run_program
from emergence.studies.binding.program_io import PROGRAM_COLUMNS, load_programs, subset
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import generate_table
from emergence.studies.binding.stream import stream_sampler
from emergence.studies.binding.stress import stress_accuracy
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.train_config import Stream, stream_programs

TOK = CharTokenizer()


# ---- parsing a program


def test_parse_and_line_values_follow_python_semantics():
    lines, query = parse_program("a=1\nb=a\na=2\nc=b\n#c:")
    assert query == "c" and lines[2] == ("a", "2")
    assert line_values(lines) == [1, 1, 2, 1]


def test_line_values_read_each_line_before_later_reassignments():
    lines, query = parse_program("a=3\na=5\nb=a\nb=7\n#b:")
    assert (lines, query) == ([("a", "3"), ("a", "5"), ("b", "a"), ("b", "7")], "b")
    assert line_values(lines) == [3, 5, 5, 7]


@pytest.mark.parametrize("bad", ["a=1\nb=a", "a=1\nbb=a\n#b:", "a:1\n#a:"])
def test_parse_rejects_malformed_programs(bad):
    with pytest.raises(PipelineError, match="program"):
        parse_program(bad)


LONG = "a=1\n" * 10  # 40 characters: the messages quote exactly these


@pytest.mark.parametrize(
    "text, bad",
    [
        (LONG + "#a", "'#x:'"),  # the query it must end in
        (LONG + "bb=a\n#a:", "'bb=a'"),
        ("a=1\nxa:", "'#x:'"),  # ends in ':' without '#'
        ("a=1\n#a=", "'#x:'"),
        ("a= 1\n#a:", "'a= 1'"),  # lines split at newlines only
        ("a=1\na-2\n#a:", "'a-2'"),
    ],
)
def test_parse_program_names_the_bad_part(text, bad):
    with refuses(repr(text[:40]), bad):  # the program, its first 40 characters
        parse_program(text)


# ---- training formats and their targets


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


def test_targets_answer_positions_and_answers_by_hand():
    texts = ["a=3\na=5\nb=a\nb=7\n#b:", "c=2\n#c:", "x=9\ny=x\nx=1\n#y:"]  # lengths 19, 7, 15
    answers = np.array([7, 2, 9], dtype=np.int32)  # a narrower dtype than the tensors keep
    digit = TOK.digit_ids
    # newline targets: the value the line's variable holds after it; the ':' target: the answer
    by_hand = {0: {3: 3, 7: 5, 11: 5, 15: 7, 18: 7}, 1: {3: 2, 6: 2}, 2: {3: 9, 7: 9, 11: 1, 14: 9}}
    for fmt in ("answer_only", "line_values"):
        enc = encode_programs(texts, answers, TOK, fmt)
        expected = torch.full((3, 19), IGNORE, dtype=torch.int64)
        for row, where in by_hand.items():
            for pos, d in where.items():
                if fmt == "line_values" or pos == len(texts[row]) - 1:
                    expected[row, pos] = digit[d]
        assert torch.equal(enc.targets, expected), fmt
        assert enc.answer_pos.tolist() == [18, 6, 14]
        assert enc.answers.tolist() == [7, 2, 9] and enc.answers.dtype == torch.int64
        assert enc.idx.dtype == torch.int64 and len(enc) == 3
        assert [TOK.decode(row.tolist()) for row in enc.idx] == texts
        assert enc.idx[1, 7:].tolist() == [TOK.pad_id] * 12
    assert torch.equal(
        encode_programs(texts, answers, TOK).targets, encode_programs(texts, answers, TOK, "answer_only").targets
    )


def test_unknown_format_names_the_key():
    with pytest.raises(PipelineError, match="binding_train.format"):
        encode_programs(["a=1\n#a:"], [1], TOK, "scratchpad")


def test_an_unknown_format_message_lists_the_formats():
    with pytest.raises(PipelineError) as err:
        encode_programs(["a=1\n#a:"], [1], TOK, "scratchpad")
    assert_refused([str(err.value)], "binding_train.format", "'scratchpad'", rule="answer_only, line_values")


# ---- the sampler over a fixed table


def test_sampler_is_a_pure_function_of_seed_and_step():
    df = generate_table(np.random.default_rng(0), ProgramConfig(n_lines=4, max_hops=2), 50, set_name="main")
    data = encode_programs(df["program"], df["answer"], TOK, "line_values")
    a, b = sampler(data, 8, seed=3), sampler(data, 8, seed=3)
    assert torch.equal(a(5)[0], b(5)[0]) and torch.equal(a(5)[1], b(5)[1])
    assert not torch.equal(a(5)[0], a(6)[0])
    assert not torch.equal(a(5)[0], sampler(data, 8, seed=4)(5)[0])


def test_sampler_draws_rows_uniformly_from_the_whole_table():
    texts = ["a=0\n#a:", "b=1\n#b:", "c=2\n#c:", "d=3\n#d:", "e=4\n#e:"]
    data = encode_programs(texts, [0, 1, 2, 3, 4], TOK, "line_values")
    idx, targets = sampler(data, 40, seed=3)(11)
    ix = np.random.default_rng([3, 11]).integers(0, 5, 40)  # the draw, recomputed
    assert [TOK.decode(row.tolist()) for row in idx] == [texts[i] for i in ix]
    assert torch.equal(targets, data.targets[ix])
    assert 0 in ix and 4 in ix  # the first and the last program can both be drawn
    drawn = np.concatenate([sampler(data, 50, seed=0)(s)[0][:, 2].numpy() for s in range(20)])
    counts = np.bincount([TOK.digit_ids.index(t) for t in drawn], minlength=5)
    assert counts.min() > 150, counts  # 1000 draws, 200 expected each


# ---- the training stream


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


def test_a_stream_that_cannot_avoid_the_evaluation_sets_says_so():
    cfg = ProgramConfig(distribution="paper", n_lines=1, max_hops=0)  # only 'x=d' programs: 260 of them
    every = frozenset(f"{v}={d}\n#{v}:" for v in "abcdefghijklmnopqrstuvwxyz" for d in range(10))
    with refuses("binding_train.stream", "step 3", "200 programs", "only 0"):
        stream_sampler(cfg, "answer_only", TOK, 2, 0, every)(3)


# ---- prediction read-out and stress accuracy


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


# ---- the programs artifact


def programs_table() -> pd.DataFrame:
    n = 4
    df = pd.DataFrame(
        {
            "program": ["a=1\n#a:", "a=2\nb=a\n#b:", "c=3\n#c:", "d=4\n#d:"],
            "query": ["a", "b", "c", "d"],
            "answer": [1, 2, 3, 4],
            "hops": [0, 1, 0, 0],
            "chain_lines": [[0], [0, 1], [0], [0]],
            "n_lines": [1, 2, 1, 1],
            "split": ["test", "train", "test", "test"],
            "set": ["main", "main", "gen", "main"],
        }
    )
    for k, name in enumerate(HEURISTICS):
        df[f"heur_{name}"] = [(k + i) % 10 for i in range(n)]
    return df


def test_programs_read_back_row_by_row_with_their_row_number(tmp_path):
    path = tmp_path / "programs.parquet"
    write_parquet(programs_table(), path)
    df = load_programs(path)
    assert df["program_id"].tolist() == [0, 1, 2, 3]
    assert df["answer"].tolist() == [1, 2, 3, 4] and df["query"].tolist() == ["a", "b", "c", "d"]
    assert [list(c) for c in df["chain_lines"]] == [[0], [0, 1], [0], [0]]
    assert df[f"heur_{list(HEURISTICS)[1]}"].tolist() == [1, 2, 3, 4]
    test = subset(df, "test")
    assert test["program_id"].tolist() == [0, 3] and test["answer"].tolist() == [1, 4]
    assert subset(df, "test", n=1)["program"].tolist() == ["a=1\n#a:"]
    assert subset(df, "test", "gen")["program_id"].tolist() == [2]


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda df: df.drop(columns=f"heur_{list(HEURISTICS)[-1]}"), ["missing", f"'heur_{list(HEURISTICS)[-1]}'"]),
        (lambda df: df.drop(columns="chain_lines"), ["missing", "'chain_lines'"]),
        (lambda df: df.assign(query=df["answer"]), ["'query'", "int64"]),
        (lambda df: df.assign(hops=df["hops"] + 0.5), ["'hops'", "float64"]),
    ],
)
def test_programs_with_the_wrong_schema_are_refused(tmp_path, change, named):
    path = tmp_path / "programs.parquet"
    write_parquet(change(programs_table()), path)
    with refuses(path, "schema", *named):
        load_programs(path)
    assert set(PROGRAM_COLUMNS) == set(programs_table().columns)
