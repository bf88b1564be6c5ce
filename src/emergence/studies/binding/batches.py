"""Binding programs -> token tensors, in the training formats the study supports.

Evaluation always uses the paper's format: the program text `a=1\\nb=a\\n#b:`
with one target, the answer digit, predicted at the final ':' position.

Training formats (params: binding_train.format):
- answer_only: exactly the evaluation format.
- line_values: the same input tokens, plus a target at every line's newline:
  the value the line's variable holds right after that line runs. The input
  is unchanged (so the model sees only paper-format programs), but each
  program now supervises 17 positions instead of 1. The single answer token
  is too thin a signal for a CPU budget (see docs/binding.md, "Training format").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from emergence.core.io import PipelineError
from emergence.studies.binding.heuristics import evaluate
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.train_config import FORMATS

IGNORE = -1  # target id the loss skips


@dataclass
class EncodedPrograms:
    idx: torch.Tensor  # (N, T) token ids, right-padded
    targets: torch.Tensor  # (N, T) next-token targets, IGNORE where no loss
    answer_pos: torch.Tensor  # (N,) position of the final ':' (predicts the answer)
    answers: torch.Tensor  # (N,) answer digits 0-9

    def __len__(self) -> int:
        return len(self.answers)


def parse_program(text: str) -> tuple[list[tuple[str, str]], str]:
    """'a=1\\nb=a\\n#b:' -> ([('a','1'), ('b','a')], 'b')."""
    *body, query = text.split("\n")
    if not (len(query) == 3 and query[0] == "#" and query[2] == ":"):
        raise PipelineError(f"program {text[:40]!r}...: last line must be a query '#x:'")
    lines = []
    for line in body:
        if len(line) != 3 or line[1] != "=":
            raise PipelineError(f"program {text[:40]!r}...: bad line {line!r}")
        lines.append((line[0], line[2]))
    return lines, query[1]


def line_values(lines: Sequence[tuple[str, str]]) -> list[int]:
    """Value of each line's left-hand variable right after that line executes."""
    return [evaluate(lines[: i + 1])[lhs] for i, (lhs, _) in enumerate(lines)]


def encode_programs(
    texts: Sequence[str], answers: Sequence[int], tok: CharTokenizer, fmt: str = "answer_only"
) -> EncodedPrograms:
    if fmt not in FORMATS:
        raise PipelineError(f"binding_train.format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    idx = tok.encode_batch(list(texts))  # (N, T)
    targets = np.full(idx.shape, IGNORE, dtype=np.int64)
    lengths = np.array([len(t) for t in texts])
    answer_pos = lengths - 1
    digit_ids = np.asarray(tok.digit_ids)
    answers = np.array(answers, dtype=np.int64)  # a copy: pandas may hand out read-only views
    targets[np.arange(len(texts)), answer_pos] = digit_ids[answers]
    if fmt == "line_values":
        newline = tok.encode("\n")[0]
        for i, text in enumerate(texts):
            lines, _ = parse_program(text)
            where = np.flatnonzero(idx[i, : lengths[i]] == newline)  # one per assignment line
            targets[i, where] = digit_ids[line_values(lines)]
    return EncodedPrograms(
        torch.from_numpy(idx).long(), torch.from_numpy(targets), torch.from_numpy(answer_pos), torch.from_numpy(answers)
    )


def sampler(data: EncodedPrograms, batch_size: int, seed: int):
    """batch_fn(step) for the training loop: a pure function of (seed, step)."""

    def batch_fn(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng([seed, step])
        ix = torch.from_numpy(rng.integers(0, len(data), batch_size))
        return data.idx[ix], data.targets[ix]

    return batch_fn


def predict_answers(
    model: torch.nn.Module, data: EncodedPrograms, tok: CharTokenizer, batch_size: int = 256
) -> np.ndarray:
    """Predicted digit (argmax over the full vocabulary; -1 if not a digit) per program."""
    with torch.no_grad():
        digit_of = {t: d for d, t in enumerate(tok.digit_ids)}
        device = next(model.parameters()).device
        preds = []
        for s in range(0, len(data), batch_size):
            idx = data.idx[s : s + batch_size].to(device)
            logits, _ = model(idx)  # (B, T, V)
            pos = data.answer_pos[s : s + batch_size].to(device)
            top = logits[torch.arange(len(idx), device=device), pos].argmax(-1).cpu().tolist()
            preds.extend(digit_of.get(t, -1) for t in top)
        return np.asarray(preds, dtype=np.int64)
