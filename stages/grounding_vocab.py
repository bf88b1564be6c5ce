"""Target nouns (both forms frequent enough) and the word-level vocabulary of study G."""
from __future__ import annotations

import pandas as pd

from emergence.cli import stage_main, start_stage
from emergence.config import from_dict, path_of, section
from emergence.data.grounding import VocabParams, build_vocab, env, lan, select_targets, token_counts
from emergence.data.nouns import CDI_NOUNS
from emergence.io import read_parquet, write_json, write_parquet


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(VocabParams, section(params, "grounding_vocab"), "grounding_vocab")
    turns = read_parquet(path_of(params, "childes_turns"), {"file": "O", "tokens": "O"})
    counts = token_counts(turns["tokens"])
    targets = select_targets(counts, CDI_NOUNS, p.n_words, p.min_count)
    vocab = build_vocab(counts, targets, p.min_token_count)
    stats = pd.DataFrame({"word": targets, "n_env": [counts[env(w)] for w in targets],
                          "n_lan": [counts[lan(w)] for w in targets]})
    write_parquet(stats, path_of(params, "grounding_targets"))
    write_json({"targets": targets, "vocab": vocab}, path_of(params, "grounding_vocab"))


if __name__ == "__main__":
    raise SystemExit(main())
