"""Template contexts of the grounding corpus: every template of paths.grounding_template_source with every
target noun in its environment slot, under the vocabulary's word rule, checked to be held out of training."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import path_of
from emergence.core.io import write_parquet
from emergence.studies.grounding import inputs
from emergence.studies.grounding.templates import read_templates, template_contexts
from emergence.studies.grounding.tokens import read_vocab


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    source = path_of(params, "grounding_template_source")
    templates = read_templates(source)
    targets, vocab, marking = read_vocab(path_of(params, "grounding_vocab"))
    turns = inputs.turns(params)
    held_out = set(inputs.eval_set(params)["turn"].tolist())
    training = [tokens for i, tokens in zip(turns.index, turns["tokens"]) if i not in held_out]
    table = template_contexts(templates, targets, marking, training)
    known = set(vocab)
    by_id = {t.id: t for t in templates}
    table["speaker"] = table["template"].map(lambda t: by_id[t].speaker)
    table["source"] = table["template"].map(lambda t: by_id[t].source)
    table["n_unk"] = [sum(tok not in known for tok in context) for context in table["context"]]
    print(
        f"{len(templates)} templates x {len(targets)} targets from {source}; "
        f"carrier tokens outside the vocabulary (<unk>): {table.groupby('template')['n_unk'].first().sum()}"
    )
    write_parquet(table, path_of(params, "grounding_templates"))


if __name__ == "__main__":
    raise SystemExit(main())
