"""Learning-rate schedules and the checkpoint step plan.

Step convention used throughout training: "step s" is the model after s
optimizer updates, so step 0 is the initialisation and the update made at
loop index s (taking step s to step s+1) uses `lr_factor(s, ...)`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

SCHEDULES = ("constant", "linear", "cosine")


def lr_factor(step: int, total: int, warmup: int, kind: str, min_ratio: float = 0.0) -> float:
    """Multiplier on the peak learning rate for the update made at `step`.

    Warmup rises linearly from 0 and reaches 1 on the last warmup update
    ((step + 1) / warmup, so no update is wasted at lr 0). Afterwards
    "constant" stays at 1, while "linear"/"cosine" decay from 1 at step
    `warmup` to `min_ratio` at step `total`.
    """
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule '{kind}' (known: {', '.join(SCHEDULES)})")
    if step < warmup:
        return (step + 1) / warmup
    if kind == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))  # 0 -> 1 over the decay phase
    if kind == "linear":
        shape = 1.0 - progress
    else:
        shape = 0.5 * (1.0 + math.cos(math.pi * progress))
    return min_ratio + (1.0 - min_ratio) * shape


@dataclass(frozen=True)
class CheckpointPlan:
    """The steps at which to save the model, as a membership test and a count.

    Emergence often happens early and abruptly, so the plan combines: step 0,
    every step up to `dense_until`, `n_log` log-spaced steps in [1, total],
    every multiple of `every` (0 disables), and the final step. Nothing lists
    every step: a run of 10^12 steps saving every 10th would otherwise hold
    10^11 integers before its first update.
    """

    total: int
    dense_until: int
    n_log: int
    every: int

    @cached_property
    def _sparse(self) -> tuple[int, ...]:
        """Step 0, the final step and the log-spaced steps: the few that follow no rule."""
        steps = {0, self.total}
        if self.n_log > 0:
            ratio = self.total ** (1.0 / max(1, self.n_log - 1))  # n_log points from 1 to total, geometrically
            steps.update(round(ratio**i) for i in range(self.n_log))
        return tuple(sorted(s for s in steps if 0 <= s <= self.total))

    def _regular(self, step: int) -> bool:
        """Saved by the dense or the every-N rule (steps in [1, total])."""
        return 1 <= step and (step <= self.dense_until or (self.every > 0 and step % self.every == 0))

    def __contains__(self, step: object) -> bool:
        if not isinstance(step, int) or not 0 <= step <= self.total:
            return False
        return self._regular(step) or step in self._sparse

    def __iter__(self) -> Iterator[int]:
        """The steps in increasing order, generated one at a time."""
        dense = range(1, min(self.dense_until, self.total) + 1)
        every = range(self.every, self.total + 1, self.every) if self.every > 0 else range(0)
        last = -1
        for step in heapq.merge(dense, every, self._sparse):
            if step != last:
                yield step
            last = step

    def count(self) -> int:
        """How many checkpoints the plan saves (closed form: a plan may be far too long to walk)."""
        dense = min(self.dense_until, self.total)
        every = self.total // self.every if self.every > 0 else 0
        both = dense // self.every if self.every > 0 else 0  # multiples of `every` up to dense_until
        return dense + every - both + sum(not self._regular(s) for s in self._sparse)


def checkpoint_steps(total: int, dense_until: int, n_log: int, every: int) -> list[int]:
    """Sorted, unique steps at which to save the model (see CheckpointPlan)."""
    return list(CheckpointPlan(total, dense_until, n_log, every))
