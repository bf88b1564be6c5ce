"""Target nouns of the visual-dialogue study (caption v<ENV> and dialogue v<LAN> both frequent enough)
and its word-level vocabulary. Words of the caption and question frames ("a picture of", "on a grey
background"), attribute words and words naming the picture itself are never targets: they do not name
a thing in the image."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_json, write_parquet
from emergence.studies.grounding import visual_inputs as inputs
from emergence.studies.grounding.nouns import CDI_NOUNS
from emergence.studies.grounding.scenes import object_nouns
from emergence.studies.grounding.tokens import VocabParams, target_vocabulary


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(VocabParams, section(params, "visual_vocab"), "visual_vocab")
    targets, vocab, stats = target_vocabulary(inputs.dialogs(params), object_nouns(CDI_NOUNS), p, "visual_vocab")
    write_parquet(stats, path_of(params, "visual_targets"))
    write_json({"targets": targets, "vocab": vocab}, path_of(params, "visual_vocab"))


if __name__ == "__main__":
    raise SystemExit(main())
