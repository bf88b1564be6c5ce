"""Aggregate and gather heads of one Transformer run, per checkpoint: heads whose saliency share on
the environment reaches <corpus>_heads.threshold (the paper: 0.3); in the image setting with
image_baseline "init", the share's rise above the head's step-0 share does."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, section
from emergence.core.io import read_parquet, write_parquet
from emergence.studies.grounding.saliency import SALIENCY_COLUMNS, find_heads
from emergence.studies.grounding.saliency_params import HeadParams
from emergence.studies.grounding.settings import Setting


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True, per_setting=True)
    setting = Setting(args.setting)
    run = setting.run(args.model, args.seed)
    where = setting.key("heads")
    p = from_dict(HeadParams, section(params, where), where)
    saliency = read_parquet(setting.run_file(params, "saliency", run), {**setting.key_columns, **SALIENCY_COLUMNS})
    heads = find_heads(saliency, p.threshold, p.baseline(setting.name))
    write_parquet(heads, setting.run_file(params, "heads", run))


if __name__ == "__main__":
    raise SystemExit(main())
