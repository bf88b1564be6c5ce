"""Target nouns (both forms frequent enough) and the word-level vocabulary of study G."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import read_parquet, write_json, write_parquet
from emergence.studies.grounding.nouns import CDI_NOUNS
from emergence.studies.grounding.tokens import VocabParams, target_vocabulary


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(VocabParams, section(params, "grounding_vocab"), "grounding_vocab")
    turns = read_parquet(path_of(params, "childes_turns"), {"file": "O", "tokens": "O"})
    targets, vocab, stats = target_vocabulary(turns, CDI_NOUNS, p, "grounding_vocab")
    write_parquet(stats, path_of(params, "grounding_targets"))
    write_json({"targets": targets, "vocab": vocab}, path_of(params, "grounding_vocab"))


if __name__ == "__main__":
    raise SystemExit(main())
