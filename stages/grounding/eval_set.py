"""Held-out evaluation contexts of a grounding corpus: turns (dialogs) cut before the first v<LAN>
that follows its v<ENV>; these never enter training.

Each context is paired with n_mismatched other targets u whose u<ENV> replaces
v<ENV> (childes; caption setting). visdial adds what the image setting reads:
the dialog's image, the context without its caption, and n_mismatched images
of other dialogs whose captions lack v.
"""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.studies.grounding.settings import Corpus
from emergence.studies.grounding.tokens import EvalParams, evaluation_set
from emergence.studies.grounding.visual_data import other_images, without_env


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_corpus=True)
    corpus = Corpus(args.corpus)
    where = corpus.key("eval")
    p = from_dict(EvalParams, section(params, where), where)
    table = corpus.table(params)
    targets, _ = corpus.vocab_index(params)
    source = str(path_of(params, corpus.table_key))
    longest = (corpus.seq_len(params), f"{corpus.key('train')}.seq_len")  # a context fits one training window
    out = evaluation_set(table, targets, p, where, source, max_len=longest)
    if corpus.name == "visdial":
        out["image_id"] = table["image_id"].to_numpy()[out["turn"].to_numpy()]
        n_env = table["env"].map(len).to_numpy()[out["turn"].to_numpy()]
        out["image_context"] = [without_env(c, n) for c, n in zip(out["context"], n_env)]
        out["other_images"] = other_images(table, out, p.n_mismatched, p.seed)
    write_parquet(out, path_of(params, where))


if __name__ == "__main__":
    raise SystemExit(main())
