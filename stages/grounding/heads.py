"""Aggregate and gather heads of one Transformer run, per checkpoint: heads whose saliency
share reaches grounding_heads.threshold (the paper: 0.3)."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, section
from emergence.core.io import read_parquet, write_parquet
from emergence.studies.grounding import inputs
from emergence.studies.grounding.saliency import SALIENCY_COLUMNS, HeadParams, find_heads


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True)
    run = inputs.checked_run(args.model, args.seed)
    p = from_dict(HeadParams, section(params, "grounding_heads"), "grounding_heads")
    saliency = read_parquet(
        inputs.run_file(params, "grounding_saliency", run), {"model": "O", "seed": "i", **SALIENCY_COLUMNS}
    )
    write_parquet(find_heads(saliency, p.threshold), inputs.run_file(params, "grounding_heads", run))


if __name__ == "__main__":
    raise SystemExit(main())
