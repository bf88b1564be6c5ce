"""A training run's settings (params `*_train` sections): imports no torch, so the params rules
(`emergence check`, the guard stage, the Snakefile) load it without the training loop."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt, Le, Lt

from emergence.core.io import PipelineError
from emergence.core.rules import field_problems
from emergence.core.train.schedule import SCHEDULES

SEED_MAX = 2**32 - 1  # np.random.seed's limit; torch.manual_seed takes up to 2**64 - 1
PRECISIONS = ("fp32", "bf16")
# torch.compile's modes: reduce-overhead records the compiled step as CUDA graphs (one launch a graph)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")


@dataclass
class TrainConfig:
    steps: Annotated[int, Ge(1)]
    batch_size: Annotated[int, Ge(1)]
    lr: Annotated[float, Gt(0)]
    optimizer: Literal["adamw", "sgd"] = "adamw"
    weight_decay: Annotated[float, Ge(0)] = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    momentum: Annotated[float, Ge(0), Lt(1)] = 0.0  # sgd
    schedule: Literal[SCHEDULES] = "constant"
    warmup_steps: Annotated[int, Ge(0)] = 0
    min_lr_ratio: Annotated[float, Ge(0), Le(1)] = 0.0
    grad_clip: Annotated[float, Gt(0)] | None = 1.0
    seed: Annotated[int, Ge(0), Le(SEED_MAX)] = 0  # numpy's seed range (from the run's seeds)
    dense_until: Annotated[int, Ge(0)] = 0  # checkpoint every step up to here
    n_log_checkpoints: Annotated[int, Ge(0)] = 20
    checkpoint_every: Annotated[int, Ge(0)] = 0  # regular checkpoints (0 = none besides log-spaced and final)
    resume_every: Annotated[int, Ge(1)] = 200  # steps between resume-state saves
    eval_every: Annotated[int, Ge(0)] = 0  # call eval_fn every N steps (and at every checkpoint)
    device: str = "auto"  # auto -> cuda if available else cpu
    # a nan/inf loss: stop (keeping the last good resume state) | continue (recorded)
    on_nonfinite: Literal["stop", "continue"] = "stop"
    precision: Literal[PRECISIONS] = "fp32"  # bf16: autocast (bf16 matmuls; fp32 weights, optimizer, softmax and loss)
    compile: bool = False  # torch.compile the training forward; a failed compile trains on in eager mode
    compile_mode: Literal[COMPILE_MODES] = "default"  # torch.compile's mode, when compile is on

    def validate(self, where: str = "train") -> None:
        """The bounds and choices declared above (a config built in code is checked here, one from params
        also when it is loaded), then the rules they cannot say."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))

        def check(key: str, ok: bool, rule: str) -> None:
            if not ok:
                raise PipelineError(f"{where}.{key}: {rule}, got {getattr(self, key)!r}")

        def is_num(v: Any) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        betas_ok = isinstance(self.betas, tuple) and len(self.betas) == 2
        check("betas", betas_ok and all(is_num(b) and 0 <= b < 1 for b in self.betas), "must be two numbers in [0, 1)")
        check("warmup_steps", self.warmup_steps <= self.steps, "must be <= steps")
        device_ok = isinstance(self.device, str) and (self.device in ("auto", "cpu") or self.device.startswith("cuda"))
        check("device", device_ok, "must be auto, cpu or cuda[:N]")
        check("compile", isinstance(self.compile, bool), "must be true or false")
