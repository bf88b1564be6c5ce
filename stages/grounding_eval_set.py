"""Held-out evaluation contexts: turns where a target's v<ENV> precedes its v<LAN>.

Each context is paired with n_mismatched other targets u whose u<ENV>
replaces v<ENV>; these turns are removed from training (grounding_train).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from emergence.cli import stage_main, start_stage
from emergence.config import from_dict, path_of, section
from emergence.data.grounding import evaluation_turns, read_vocab
from emergence.io import PipelineError, read_parquet, write_parquet


@dataclasses.dataclass
class EvalParams:
    max_per_word: int = 10      # contexts per target noun
    n_mismatched: int = 10      # other targets u per context
    seed: int = 0

    def validate(self, where: str) -> None:
        for key in ("max_per_word", "n_mismatched"):
            if getattr(self, key) < 1:
                raise PipelineError(f"{where}.{key}: must be >= 1, got {getattr(self, key)}")


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(EvalParams, section(params, "grounding_eval"), "grounding_eval")
    turns = read_parquet(path_of(params, "childes_turns"), {"file": "O", "tokens": "O"})
    targets, _ = read_vocab(path_of(params, "grounding_vocab"))
    if p.n_mismatched > len(targets) - 1:
        raise PipelineError(f"grounding_eval.n_mismatched: at most {len(targets) - 1} other targets exist, "
                            f"got {p.n_mismatched}")
    table = evaluation_turns(turns, targets, p.max_per_word, p.seed)
    if missing := sorted(set(targets) - set(table["word"])):
        raise PipelineError(f"{path_of(params, 'childes_turns')}: no held-out context for target "
                            f"'{missing[0]}' ({len(missing)} targets lack one)")
    rng = np.random.default_rng(p.seed)
    table["others"] = [sorted(rng.choice([u for u in targets if u != w], p.n_mismatched, replace=False).tolist())
                       for w in table["word"]]
    write_parquet(table, path_of(params, "grounding_eval"))


if __name__ == "__main__":
    raise SystemExit(main())
