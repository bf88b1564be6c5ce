"""R^2 of the grounding gain G(v) regressed on (v<ENV>, v<LAN>) co-occurrence statistics of the
training turns, per run and checkpoint."""

from __future__ import annotations

import pandas as pd

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import read_parquet, write_parquet
from emergence.studies.grounding import inputs
from emergence.studies.grounding.cooc import CoocParams, cooccurrence_stats, r2_table
from emergence.studies.grounding.gain import word_gains

WORD_SCORES = {"word": "O", "s_matched": "f", "s_mismatched": "f", "gain": "f"}  # what word_gains averages


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(CoocParams, section(params, "grounding_cooc"), "grounding_cooc")
    targets, _ = inputs.vocab_index(params)
    held_out = set(inputs.eval_set(params)["turn"].tolist())
    stats = cooccurrence_stats(inputs.turns(params), held_out, targets)
    rows = pd.concat(
        [
            read_parquet(inputs.run_file(params, "grounding_gain", run), {**inputs.RUN_KEYS, **WORD_SCORES})
            for run in inputs.runs_of(params).names()
        ],
        ignore_index=True,
    )
    write_parquet(stats, path_of(params, "grounding_cooc_words"))
    write_parquet(r2_table(word_gains(rows), stats, p.features), path_of(params, "grounding_cooc"))


if __name__ == "__main__":
    raise SystemExit(main())
