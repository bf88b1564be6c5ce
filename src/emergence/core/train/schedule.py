"""Learning-rate schedules and the checkpoint step plan.

Step convention used throughout training: "step s" is the model after s
optimizer updates, so step 0 is the initialisation and the update made at
loop index s (taking step s to step s+1) uses `lr_factor(s, ...)`.
"""

from __future__ import annotations

import math

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


def checkpoint_steps(total: int, dense_until: int, n_log: int, every: int) -> list[int]:
    """Sorted, unique steps at which to save the model.

    Emergence often happens early and abruptly, so the plan combines: step 0,
    every step up to `dense_until`, `n_log` log-spaced steps in [1, total],
    every multiple of `every` (0 disables), and the final step.
    """
    steps = {0, total}
    steps.update(range(1, min(dense_until, total) + 1))
    if n_log > 0:
        ratio = total ** (1.0 / max(1, n_log - 1))  # n_log points from 1 to total, geometrically
        steps.update(round(ratio**i) for i in range(n_log))
    if every > 0:
        steps.update(range(every, total + 1, every))
    return sorted(s for s in steps if 0 <= s <= total)
