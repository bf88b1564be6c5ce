"""Aggregate and gather heads of one Transformer run, per checkpoint: heads whose saliency
share reaches grounding_heads.threshold (the paper: 0.3)."""
from __future__ import annotations

from dataclasses import dataclass

from emergence.analysis.grounding_saliency import find_heads
from emergence.cli import stage_main, start_stage
from emergence.config import from_dict, section
from emergence.data import grounding_inputs as inputs
from emergence.io import PipelineError, read_parquet, write_parquet


@dataclass
class HeadParams:
    threshold: float = 0.3

    def validate(self, where: str) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise PipelineError(f"{where}.threshold: a share in (0, 1], got {self.threshold}")


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True)
    run = inputs.checked_attention_run(params, args.model, args.seed)
    p = from_dict(HeadParams, section(params, "grounding_heads"), "grounding_heads")
    saliency = read_parquet(inputs.run_file(params, "grounding_saliency", run),
                            {"model": "O", "seed": "i", "step": "i", "layer": "i", "head": "i", "metric": "O",
                             "value": "f"})
    write_parquet(find_heads(saliency, p.threshold), inputs.run_file(params, "grounding_heads", run))


if __name__ == "__main__":
    raise SystemExit(main())
