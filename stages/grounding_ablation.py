"""Zero-ablate one Transformer run's aggregate (and gather) heads at every checkpoint, against
as many random heads from the same layers, and record v<LAN>'s matched surprisal per context."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from tqdm import tqdm

from emergence.analysis.grounding_ablation import ablation_rows
from emergence.analysis.grounding_saliency import KINDS, matched_inputs
from emergence.cli import stage_main, start_stage
from emergence.config import from_dict, section
from emergence.data import grounding_inputs as inputs
from emergence.io import PipelineError, read_parquet, write_parquet
from emergence.train import load_checkpoint


@dataclass
class AblationParams:
    n_draws: int = 5      # random control head sets per checkpoint
    seed: int = 0

    def validate(self, where: str) -> None:
        if self.n_draws < 1:
            raise PipelineError(f"{where}.n_draws: must be >= 1, got {self.n_draws}")


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True)
    run = inputs.checked_attention_run(params, args.model, args.seed)
    p = from_dict(AblationParams, section(params, "grounding_ablation"), "grounding_ablation")
    heads = read_parquet(inputs.run_file(params, "grounding_heads", run),
                         {"step": "i", "layer": "i", "head": "i", "kind": "O"})
    _, index = inputs.vocab_index(params)
    contexts, targets, _ = matched_inputs(inputs.eval_set(params), index)
    tables = []
    for step, path in tqdm(inputs.run_checkpoints(params, run), desc=f"ablation {run}"):
        model = load_checkpoint(path)[0]
        for kind in KINDS:
            chosen = heads[(heads["step"] == step) & (heads["kind"] == kind)]
            pairs = list(zip(chosen["layer"].tolist(), chosen["head"].tolist()))
            table = ablation_rows(model, contexts, targets, pairs, p.n_draws, p.seed + step)
            tables.append(table.assign(step=step, kind=kind))
    out = pd.concat(tables, ignore_index=True).assign(model=args.model, seed=args.seed)
    first = ["model", "seed", "step", "kind"]
    write_parquet(out[first + [c for c in out.columns if c not in first]],
                  inputs.run_file(params, "grounding_ablation", run))


if __name__ == "__main__":
    raise SystemExit(main())
