"""Character tokenizer with a fixed vocabulary for variable-binding programs.

The vocabulary does not depend on any data, so token ids mean the same thing
in every dataset, checkpoint and analysis.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence

import numpy as np

from emergence.core.io import PipelineError

VOCAB: tuple[str, ...] = ("<pad>", "\n", "=", "#", ":", *string.digits, *string.ascii_lowercase)


class CharTokenizer:
    def __init__(self) -> None:
        self.vocab = VOCAB
        self.pad_id = 0
        self._ids = {ch: i for i, ch in enumerate(VOCAB) if i != self.pad_id}
        self.digit_ids = [self._ids[d] for d in string.digits]  # answer classes 0..9, in order

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        try:
            return [self._ids[ch] for ch in text]
        except KeyError:
            pos = next(i for i, ch in enumerate(text) if ch not in self._ids)
            raise PipelineError(
                f"tokenizer: character {text[pos]!r} at position {pos} is not in the vocabulary"
            ) from None

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.vocab[i] for i in ids if i != self.pad_id)

    def encode_batch(self, texts: Sequence[str], pad_to: int | None = None) -> np.ndarray:
        """(B, T) int64 ids, right-padded with pad_id; T = pad_to or the longest text."""
        encoded = [self.encode(t) for t in texts]
        longest = max(map(len, encoded), default=0)
        width = longest if pad_to is None else pad_to
        if width < longest:
            raise PipelineError(f"tokenizer: pad_to={pad_to} is shorter than the longest text ({longest})")
        out = np.full((len(encoded), width), self.pad_id, dtype=np.int64)  # (B, T)
        for row, ids in zip(out, encoded):
            row[: len(ids)] = ids
        return out
