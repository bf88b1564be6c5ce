"""The default's training aids, taken away one at a time: what each does to the phases, the accuracy and
the patching along the chain.

The default trains with two aids the paper's plain GPT-2 does not have (docs/binding.md): a causal
convolution before attention (a Canon layer, `binding_model.conv_kernel`) and a target at every line's
value (`binding_train.format: line_values`). An aid variant is the run's params with a fixed set of
overrides (AIDS); it trains on the same distribution, seed and budget as the run it is compared with.
What each run measures is aid_table.py: kept apart so that the trainings, which import this module, do
not depend on how their results are tabled and shown.
"""

from __future__ import annotations

import copy
import dataclasses

from emergence.core.io import PipelineError

# name -> {params section: overrides}. "plain" is the paper profile's model at the run's size: GPT-2's
# learned positions, tanh GELU and tied embeddings, no conv, the answer as the only target.
AIDS: dict[str, dict[str, dict]] = {
    "no_conv": {"binding_model": {"conv_kernel": 0}},
    "no_line_values": {"binding_train": {"format": "answer_only"}},
    "plain": {
        "binding_model": {"conv_kernel": 0, "pos": "learned", "act": "gelu_tanh", "tie_embeddings": True},
        "binding_train": {"format": "answer_only"},
    },
    "with_aids": {"binding_model": {"conv_kernel": 4}, "binding_train": {"format": "line_values"}},  # paper + both
}


@dataclasses.dataclass
class AidParams:
    """params.yaml binding_aids: the variants (AIDS names) and the seeds each one trains (seeds of base.seeds,
    so the default run of that seed stands beside it). No variant (the default: opt-in, profiles/full.yaml)
    trains nothing."""

    aids: list[str]
    seeds: list[int]

    def validate(self, where: str) -> None:
        if not self.seeds:
            raise PipelineError(f"{where}.seeds: at least one seed is needed, got {self.seeds}")
        unknown = [a for a in self.aids if a not in AIDS]
        if unknown:
            raise PipelineError(f"{where}.aids: {unknown} unknown; the variants are {', '.join(AIDS)}")
        if len(set(self.aids)) < len(self.aids) or len(set(self.seeds)) < len(self.seeds):
            raise PipelineError(f"{where}: a variant or seed is listed twice ({self.aids}, {self.seeds})")


def without_aid(params: dict, aid: str) -> dict:
    """`params` with the sections `aid` overrides replaced (a copy of the same type: a stage's declared
    params stay declared); the rest shared."""
    if aid not in AIDS:
        raise PipelineError(f"binding_aids: no variant {aid!r}; the variants are {', '.join(AIDS)}")
    changed = copy.copy(params)
    for name, values in AIDS[aid].items():
        changed[name] = {**params[name], **values}
    return changed
