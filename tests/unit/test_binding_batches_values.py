"""Program parsing messages, training targets derived by hand, the sampler's draws recomputed, and the
programs artifact written and read back (schema, row ids, the subset picked)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from refusals import assert_refused, refuses

from emergence.core.io import PipelineError, write_parquet
from emergence.studies.binding.batches import IGNORE, encode_programs, line_values, parse_program, sampler
from emergence.studies.binding.heuristics import HEURISTICS
from emergence.studies.binding.program_io import PROGRAM_COLUMNS, load_programs, subset
from emergence.studies.binding.tokenizer import CharTokenizer

TOK = CharTokenizer()
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


def test_line_values_read_each_line_before_later_reassignments():
    lines, query = parse_program("a=3\na=5\nb=a\nb=7\n#b:")
    assert (lines, query) == ([("a", "3"), ("a", "5"), ("b", "a"), ("b", "7")], "b")
    assert line_values(lines) == [3, 5, 5, 7]


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


def test_an_unknown_format_message_lists_the_formats():
    with pytest.raises(PipelineError) as err:
        encode_programs(["a=1\n#a:"], [1], TOK, "scratchpad")
    assert_refused([str(err.value)], "binding_train.format", "'scratchpad'", rule="answer_only, line_values")


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
