import string

import numpy as np
from refusals import refuses

from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import generate_table
from emergence.studies.binding.tokenizer import CharTokenizer


def test_vocab_is_fixed():
    tok = CharTokenizer()
    assert len(tok) == 41
    assert tok.vocab[:5] == ("<pad>", "\n", "=", "#", ":")
    assert tok.pad_id == 0 and tok.vocab[0] == "<pad>"
    assert [tok.vocab[i] for i in tok.digit_ids] == list(string.digits)
    assert tok.digit_ids == list(range(5, 15))
    assert tok.encode(string.ascii_lowercase) == list(range(15, 41))
    assert CharTokenizer().vocab == tok.vocab  # nothing is learned from data


def test_round_trip_on_generated_programs():
    tok = CharTokenizer()
    texts = generate_table(np.random.default_rng(0), ProgramConfig(), 50, set_name="t")["program"]
    for text in texts:
        ids = tok.encode(text)
        assert tok.pad_id not in ids
        assert tok.decode(ids) == text
    assert tok.encode("a=1\nb=a\n#b:") == [15, 2, 6, 1, 16, 2, 15, 1, 3, 16, 4]


def test_encode_names_bad_character_and_position():
    tok = CharTokenizer()
    # the first character outside the vocabulary is named, not a later one ('C') nor a valid one
    with refuses("tokenizer", "'B'", "position 4") as e:
        tok.encode("a=1\nB=C")
    assert "'C'" not in str(e.value)
    with refuses("tokenizer", "' '", "position 1"):
        tok.encode("a =1")
    with refuses("tokenizer", "'<'", "position 0"):  # the pad token is no character: "<" is not in the vocabulary
        tok.encode("<pad>")


def test_encode_batch_right_pads():
    tok = CharTokenizer()
    texts = ["a=1\n#a:", "a=1\nb=a\n#b:"]
    batch = tok.encode_batch(texts)
    assert batch.shape == (2, 11) and batch.dtype == np.int64
    assert batch[0, :7].tolist() == tok.encode(texts[0])
    assert (batch[0, 7:] == tok.pad_id).all()
    assert tok.decode(batch[0]) == texts[0]
    # by hand from the vocabulary: a=15, '='=2, '1'=6, newline=1, '#'=3, ':'=4, b=16; pad 0
    assert batch.tolist() == [[15, 2, 6, 1, 3, 15, 4, 0, 0, 0, 0], [15, 2, 6, 1, 16, 2, 15, 1, 3, 16, 4]]
    wide = tok.encode_batch(texts, pad_to=16)
    assert wide[:, :11].tolist() == batch.tolist()
    assert wide.shape == (2, 16) and (wide[:, 11:] == tok.pad_id).all()
    exact = tok.encode_batch(texts, pad_to=11)  # as wide as the longest text: no padding on it
    assert exact.tolist() == batch.tolist()
    with refuses("tokenizer", "pad_to=10", "(11)"):  # asked for, and the longest text's length
        tok.encode_batch(texts, pad_to=10)


def test_encode_batch_of_nothing_and_of_empty_texts_is_zero_wide():
    tok = CharTokenizer()
    assert tok.encode_batch([]).shape == (0, 0)
    assert tok.encode_batch(["", ""]).shape == (2, 0)
    assert tok.encode_batch([], pad_to=3).shape == (0, 3)
