"""Target nouns of a grounding corpus (v<ENV> and v<LAN> both frequent enough) and its word-level vocabulary.

Candidates: the noun list (paths.grounding_nouns); the targets table counts both forms of every
candidate and marks which pass min_count and which are chosen.

visdial: words of the caption and question frames ("a picture of", "on a grey
background"), attribute words and words naming the picture itself are never
targets: they do not name a thing in the image.
"""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_json, write_parquet
from emergence.studies.grounding.nouns import read_nouns
from emergence.studies.grounding.scenes import object_nouns
from emergence.studies.grounding.settings import Corpus
from emergence.studies.grounding.tokens import VocabParams, target_vocabulary


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_corpus=True)
    corpus = Corpus(args.corpus)
    where = corpus.key("vocab")
    p = from_dict(VocabParams, section(params, where), where)
    nouns = read_nouns(path_of(params, "grounding_nouns"))
    nouns = nouns if corpus.name == "childes" else object_nouns(nouns)
    targets, vocab, stats = target_vocabulary(corpus.table(params, raw=True), nouns, p, where)
    write_parquet(stats, path_of(params, corpus.key("targets")))
    write_json({"targets": targets, "vocab": vocab, "env_marking": p.env_marking}, path_of(params, where))


if __name__ == "__main__":
    raise SystemExit(main())
