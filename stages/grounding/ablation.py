"""Zero-ablate one Transformer run's aggregate (and gather) heads at every checkpoint, against as
many random heads from the same layers, and record v<LAN>'s matched surprisal per context (image
setting: read after its own image)."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, section
from emergence.core.io import read_parquet, write_parquet
from emergence.studies.grounding.ablation import checkpoint_ablations
from emergence.studies.grounding.ablation_params import HeadAblationParams
from emergence.studies.grounding.saliency import HEAD_COLUMNS
from emergence.studies.grounding.settings import Setting


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True, per_setting=True)
    setting = Setting(args.setting)
    run = setting.run(args.model, args.seed)
    where = setting.key("ablation")
    p = from_dict(HeadAblationParams, section(params, where), where)
    heads = read_parquet(setting.run_file(params, "heads", run), HEAD_COLUMNS)
    _, index = setting.corpus.vocab_index(params)
    contexts, targets, _, prefixes = setting.matched_inputs(params, index)
    models = setting.checkpoint_models(params, run, "ablation")
    keys = setting.keys(args.model, args.seed)
    out = checkpoint_ablations(models, heads, contexts, targets, p, prefixes).assign(**keys)
    first = [*keys, "step", "kind"]
    write_parquet(out[first + [c for c in out.columns if c not in first]], setting.run_file(params, "ablation", run))


if __name__ == "__main__":
    raise SystemExit(main())
