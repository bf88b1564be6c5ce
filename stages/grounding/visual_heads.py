"""Aggregate and gather heads of one visual-dialogue Transformer run, per checkpoint: heads whose
saliency share on the environment (caption v<ENV> or image positions) reaches visual_heads.threshold;
in the image setting (image_baseline "init") the share's rise above the head's step-0 share does."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, section
from emergence.core.io import read_parquet, write_parquet
from emergence.studies.grounding import visual_inputs as inputs
from emergence.studies.grounding.saliency import SALIENCY_COLUMNS, VisualHeadParams, find_heads


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True, per_setting=True)
    run = inputs.checked_run(args.setting, args.model, args.seed)
    p = from_dict(VisualHeadParams, section(params, "visual_heads"), "visual_heads")
    saliency = read_parquet(
        inputs.run_file(params, "visual_saliency", run), {"setting": "O", "model": "O", "seed": "i", **SALIENCY_COLUMNS}
    )
    write_parquet(
        find_heads(saliency, p.threshold, p.baseline(args.setting)), inputs.run_file(params, "visual_heads", run)
    )


if __name__ == "__main__":
    raise SystemExit(main())
