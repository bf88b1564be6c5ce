"""Line-value accuracy of binding checkpoints by chain depth of the line: where the plateau sits.

    python bench/binding_line_depth.py data/binding/runs/seed1/step6000 [more checkpoints] [--programs 600]

A line's depth: 0 for `x=5`, 1 + the depth of the source's last assignment for `x=y`. Programs are fresh
draws of the training stream's distribution (params.yaml); a line is right when the model's prediction at
its newline (the `line_values` target) is its value. Used for the plateau notes in docs/binding.md.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import torch
import yaml

from emergence.core.train.checkpoint import load_checkpoint
from emergence.studies.binding.batches import encode_programs, parse_program
from emergence.studies.binding.sets import load_program_config, sample_program
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.train_config import stream_programs, train_params


def line_depths(text: str) -> list[int]:
    lines, _ = parse_program(text)
    last, depth = {}, []
    for i, (lhs, rhs) in enumerate(lines):
        depth.append(0 if rhs.isdigit() else 1 + depth[last[rhs]])
        last[lhs] = i
    return depth


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", help="step{N} directories of binding runs")
    ap.add_argument("--programs", type=int, default=600)
    ap.add_argument("--seed", type=int, default=99)
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    params = yaml.safe_load(open(args.params))
    cfg = stream_programs(load_program_config(params), train_params(params, 0, "cpu")[2])
    rng, tok = np.random.default_rng(args.seed), CharTokenizer()
    programs = [sample_program(rng, cfg) for _ in range(args.programs)]
    data = encode_programs([p.text for p in programs], [p.answer for p in programs], tok, "line_values")
    depths = [line_depths(p.text) for p in programs]
    for ckpt in args.checkpoints:
        with torch.no_grad():
            pred = load_checkpoint(ckpt)[0](data.idx)[0].argmax(-1)  # (N, T)
        right = defaultdict(list)
        for i, d in enumerate(depths):
            where = (data.targets[i] >= 0).nonzero().flatten()[:-1]  # the newlines; the last target is the answer
            for depth, pos in zip(d, where.tolist()):
                right[min(depth, 5)].append(bool(pred[i, pos] == data.targets[i, pos]))
        cells = ", ".join(f"{d if d < 5 else '5+'}: {np.mean(v):.2f} (n {len(v)})" for d, v in sorted(right.items()))
        print(f"{ckpt}  line-value accuracy by depth  {cells}")


if __name__ == "__main__":
    main()
