"""Fresh training programs every step (binding_train.stream), never an evaluation program."""

from __future__ import annotations

import numpy as np
import torch

from emergence.core.io import PipelineError
from emergence.studies.binding.batches import encode_programs
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import sample_program
from emergence.studies.binding.tokenizer import CharTokenizer

MAX_DRAWS = 100  # per program of a batch, before the distribution is declared too small


def stream_sampler(
    cfg: ProgramConfig, fmt: str, tok: CharTokenizer, batch_size: int, seed: int, held_out: frozenset[str]
):
    """batch_fn(step) drawing `batch_size` fresh programs of the configured distribution each step, a
    pure function of (seed, step); programs whose text is in `held_out` (the evaluation sets) are
    drawn again, so training never sees an evaluation program."""

    def batch_fn(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng([seed, step])
        programs = []
        for _ in range(MAX_DRAWS * batch_size):
            program = sample_program(rng, cfg)
            if program.text not in held_out:
                programs.append(program)
            if len(programs) == batch_size:
                break
        else:
            raise PipelineError(
                f"binding_train.stream: step {step} drew {MAX_DRAWS * batch_size} programs and found only "
                f"{len(programs)} outside the evaluation sets: binding_programs allows too few distinct programs"
            )
        data = encode_programs([p.text for p in programs], [p.answer for p in programs], tok, fmt)
        return data.idx, data.targets

    return batch_fn
