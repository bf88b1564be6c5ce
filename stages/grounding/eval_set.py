"""Held-out evaluation contexts: turns where a target's v<ENV> precedes its v<LAN>.

Each context is paired with n_mismatched other targets u whose u<ENV>
replaces v<ENV>; these turns are removed from training (grounding_train).
"""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import read_parquet, write_parquet
from emergence.studies.grounding.inputs import seq_len
from emergence.studies.grounding.tokens import EvalParams, evaluation_set, read_vocab


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(EvalParams, section(params, "grounding_eval"), "grounding_eval")
    turns = read_parquet(path_of(params, "childes_turns"), {"file": "O", "tokens": "O"})
    targets, _ = read_vocab(path_of(params, "grounding_vocab"))
    table = evaluation_set(
        turns, targets, p, "grounding_eval", str(path_of(params, "childes_turns")), max_len=seq_len(params)
    )
    write_parquet(table, path_of(params, "grounding_eval"))


if __name__ == "__main__":
    raise SystemExit(main())
