"""Score a binding checkpoint on fresh programs of every distribution we have, by hop count.

    python bench/binding_robustness.py data/binding/runs/seed0/step10000 [--per-hop 60] [--seed 11]

Rows: the paper distribution (cubic hop prior, `--paper N` programs), the balanced generator
(`--balanced N`), and each stress distribution and both generators unpinned (`ref_*`), `--per-hop`
programs per hop class, hops uniform.
The programs are drawn here, so they are new to any run; labels come from the interpreter. Used for
the robustness experiments in docs/binding.md; the pipeline's own measure is the binding_stress stage.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import torch

from emergence.core.train.checkpoint import load_checkpoint
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import generate_table
from emergence.studies.binding.stress import stress_accuracy, stress_table


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", help="a step{N} directory of a binding run")
    ap.add_argument("--per-hop", type=int, default=60, help="stress programs per (distribution, hop count)")
    ap.add_argument("--paper", type=int, default=600, help="programs of the paper distribution")
    ap.add_argument("--balanced", type=int, default=300, help="programs of the balanced generator")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = load_checkpoint(args.checkpoint)[0]
    paper = ProgramConfig(distribution="paper")
    programs = pd.concat(
        [
            stress_table(np.random.default_rng(args.seed), paper, args.per_hop),
            generate_table(np.random.default_rng(args.seed + 1), paper, args.paper, set_name="paper"),
            generate_table(np.random.default_rng(args.seed + 2), ProgramConfig(), args.balanced, set_name="balanced"),
        ]
    )
    table = stress_accuracy(model, programs, seed=-1, step=-1)
    pooled = table.groupby("set")[["n", "correct"]].sum()
    by_hop = table.pivot_table(index="set", columns="hops", values="accuracy")
    by_hop["all"] = pooled["correct"] / pooled["n"]
    by_hop["n"] = pooled["n"]
    print(by_hop.round(3).to_string())


if __name__ == "__main__":
    main()
