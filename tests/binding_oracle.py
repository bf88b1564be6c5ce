"""A binding "model" whose every prediction is known, for the bench scripts that score checkpoints, and a
second small interpreter of the programs to work out what they should print.

The oracle reads the program text it is given and predicts, at each line's newline, the value the line's
variable holds after it and, at each query's ':', the queried variable's value: right, except for the
variables named in its config's `wrong` (there it predicts the value plus one, mod 10). It records the
texts of every scoring forward (no targets) and the batches of every training forward, so a test can work
out what a bench should print from what the bench gave it. It is a zoo architecture, so a checkpoint of it
loads through load_checkpoint like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from emergence.core.models.registry import register
from emergence.core.train.checkpoint import save_checkpoint
from emergence.studies.binding.tokenizer import CharTokenizer

TOK = CharTokenizer()
SEEN: list[list[str]] = []  # the texts of each scoring forward, in call order
TRAINED: list[tuple[torch.Tensor, torch.Tensor]] = []  # (idx, targets) of each training forward


@dataclass
class OracleConfig:
    wrong: str = ""  # variables whose values it gets wrong
    d_vocab: int = len(TOK)


def lines_of(text: str) -> tuple[list[tuple[str, str]], str]:
    """'a=1\\nb=a\\n#b:' -> ([('a', '1'), ('b', 'a')], 'b')."""
    *body, query = text.split("\n")
    return [(line[0], line[2]) for line in body], query[1]


def trace(lines: list[tuple[str, str]], var: str, end: int | None = None) -> tuple[int, list[int]]:
    """(value of `var` before line `end`, the lines of its chain from the constant on): read backwards."""
    end = len(lines) if end is None else end
    i = max(j for j in range(end) if lines[j][0] == var)
    rhs = lines[i][1]
    if rhs.isdigit():
        return int(rhs), [i]
    value, chain = trace(lines, rhs, i)
    return value, [*chain, i]


def predictions(text: str, wrong: str) -> dict[int, int]:
    """Position -> predicted digit: the newline after each assignment, the ':' of each query."""
    out, start, values = {}, 0, {}
    for line in text.split("\n"):
        if line.startswith("#"):
            value = values[line[1]]
            out[start + 2] = (value + 1) % 10 if line[1] in wrong else value
        else:
            values[line[0]] = int(line[2]) if line[2].isdigit() else values[line[2]]
            if start + 3 < len(text):
                out[start + 3] = (values[line[0]] + 1) % 10 if line[0] in wrong else values[line[0]]
        start += len(line) + 1
    return out


@register("binding_oracle_test", OracleConfig)
class Oracle(nn.Module):
    def __init__(self, config: OracleConfig):
        super().__init__()
        self.config = config
        self.weight = nn.Parameter(torch.ones(2, 2))

    def forward(self, idx, targets=None):
        texts = [TOK.decode(row.tolist()) for row in idx]
        logits = torch.zeros(*idx.shape, len(TOK))  # (B, T, V)
        for b, text in enumerate(texts):
            for pos, digit in predictions(text, self.config.wrong).items():
                logits[b, pos, TOK.digit_ids[digit]] = 1.0
        if targets is None:
            SEEN.append(texts)
            return logits, None
        TRAINED.append((idx.clone(), targets.clone()))
        return logits + 0 * self.weight.sum(), (self.weight**2).mean()


def oracle(wrong: str = "") -> Oracle:
    return Oracle(OracleConfig(wrong=wrong))


def oracle_checkpoint(folder, step: int, wrong: str):
    """A step{step} checkpoint of an oracle wrong about `wrong`."""
    return save_checkpoint(oracle(wrong), folder, step, {})


def scored() -> list[str]:
    """Every text scored since the last reset, in order; resets the record."""
    texts = [t for batch in SEEN for t in batch]
    SEEN.clear()
    return texts
