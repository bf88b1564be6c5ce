"""Template grounding of one run, per checkpoint: s(v<LAN> | template with u<ENV>) for every template,
u and v from one forward pass per (template, u); G averages every mismatch u != v."""

from __future__ import annotations

import pandas as pd

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import path_of
from emergence.core.io import read_parquet, write_parquet
from emergence.studies.grounding import inputs
from emergence.studies.grounding.gain import last_log_probs
from emergence.studies.grounding.templates import template_gain_table, template_surprisals
from emergence.studies.grounding.tokens import encode, run_name


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True)
    run = run_name(args.model, args.seed)
    targets, index = inputs.vocab_index(params)
    contexts = read_parquet(path_of(params, "grounding_templates"), {"template": "O", "word": "O", "context": "O"})
    encoded = [encode(c, index) for c in contexts["context"]]
    template_ids = list(dict.fromkeys(contexts["template"]))
    tables = []
    for step, model in inputs.checkpoint_models(params, run, "template gain"):
        s = template_surprisals(last_log_probs(model, encoded), contexts, targets, index)
        tables.append(template_gain_table(s, template_ids, targets).assign(step=step))
    out = pd.concat(tables, ignore_index=True).assign(model=args.model, seed=args.seed)
    cols = ["model", "seed", "step", "template", "word", "s_matched", "s_mismatched", "gain"]
    write_parquet(out[cols], path_of(params, "grounding_template_gain") / f"{run}.parquet")


if __name__ == "__main__":
    raise SystemExit(main())
