"""Where 1-hop chains fail: a checkpoint scored on the second generator's 1-hop programs by layout, and the
layout of 1-hop chains in the training stream beside the second generator's.

    python bench/binding_one_hop.py data/binding/runs/seed0/step13000 [--programs 400] [--seed 5]

Layout of a 1-hop chain `a=5 ... b=a ... #b:`: the distance from the constant's line to the copy's, whether
the copied variable `a` is written again after the copy (its value then differs from `b`'s), whether the
constant is on line 1. Used for the 1-hop notes in docs/binding.md.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

from emergence.core.train.checkpoint import load_checkpoint
from emergence.studies.binding.batches import encode_programs, parse_program, predict_answers
from emergence.studies.binding.sets import load_program_config, sample_program
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.train_config import stream_programs, train_params

sys.path.insert(0, str(Path(__file__).parent))
import binding_spec_check as spec  # noqa: E402  (a sibling script, not a package)


def layout(text: str) -> dict | None:
    """The 1-hop chain's layout, or None if the query's chain is not 1 hop."""
    lines, query = parse_program(text)
    _, chain = spec.run(lines)[query]
    if len(chain) != 2:
        return None
    source = lines[chain[1]][1]
    return {
        "distance": chain[1] - chain[0],
        "source_rewritten": any(lhs == source for lhs, _ in lines[chain[1] + 1 :]),
        "const_line1": chain[0] == 0,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", help="a step{N} directory of a binding run")
    ap.add_argument("--programs", type=int, default=400, help="1-hop programs of the second generator")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--params", default="params.yaml", help="whose binding_programs / binding_train give the stream")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    programs = pd.DataFrame(spec.draw(random.Random(args.seed), lambda p: p["hops"] == 1, args.programs))
    programs = programs[programs["hops"] == 1].reset_index(drop=True)
    tok = CharTokenizer()
    pred = predict_answers(
        load_checkpoint(args.checkpoint)[0], encode_programs(programs["program"], programs["answer"], tok), tok
    )
    scored = pd.DataFrame([layout(t) for t in programs["program"]]).assign(
        correct=pred == programs["answer"].to_numpy()
    )
    print(
        f"{args.checkpoint}: {len(scored)} 1-hop programs of the second generator, "
        f"accuracy {scored['correct'].mean():.3f}"
    )
    for key in ("source_rewritten", "const_line1"):
        print(scored.groupby(key)["correct"].agg(["mean", "size"]).round(3).to_string(), "\n")
    print(scored.groupby(scored["distance"].clip(upper=4))["correct"].agg(["mean", "size"]).round(3).to_string())

    params = yaml.safe_load(open(args.params))
    cfg = stream_programs(load_program_config(params), train_params(params, 0, "cpu")[2])
    rng = np.random.default_rng(args.seed)
    ours = [x for x in (layout(sample_program(rng, cfg).text) for _ in range(5000)) if x]
    r = random.Random(args.seed)
    theirs = [x for x in (layout(p["program"]) for p in (spec.random_program(r) for _ in range(20000)) if p) if x]
    table = pd.DataFrame(
        {"training stream": pd.DataFrame(ours).mean(), "second generator": pd.DataFrame(theirs).mean()}
    )
    print(f"\n1-hop chain layout, means ({len(ours)} / {len(theirs)} 1-hop programs):")
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
