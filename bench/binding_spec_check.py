"""Score a binding checkpoint on programs from a second generator, written from the spec alone.

    python bench/binding_spec_check.py data/binding/runs/seed0/step20000 [--per-hop 100] [--seed 0]

The spec: 16 lines `x=D` or `x=y` over a-z and 0-9 with Python semantics, then `#q:`; the query's
chain at most 4 hops; distractors with reassignment. This generator was written without reading
the project's generators (studies/binding/{paper,balanced}.py) so that a model that learned their
layout shows it: every line writes a random variable of a random pool (2-26 letters), its
right-hand side a digit (probability uniform in [0.15, 0.7] per program) or a copy of any variable
already written (of the 3 most recent half the time, so deep chains are not vanishingly rare). Labels
and hop counts come from its own interpreter; programs whose constants are all one digit are
dropped; each hop count 0-4 is filled to `--per-hop` by rejection. Besides the whole mix, subsets
pinned by a property: chain lines adjacent, the query written 3+ times, <= 5 or >= 14 distinct
variables, the chain's constant on line 1.
"""

from __future__ import annotations

import argparse
import random
import string

import numpy as np
import pandas as pd
import torch

from emergence.core.train.checkpoint import load_checkpoint
from emergence.studies.binding.batches import encode_programs, predict_answers
from emergence.studies.binding.tokenizer import CharTokenizer

N_LINES, MAX_HOPS = 16, 4
VARIANTS = {
    "mix": lambda p: True,
    "adjacent": lambda p: bool(np.all(np.diff(p["chain"]) == 1)),  # a 0-hop chain is one line
    "query_thrice": lambda p: p["q_writes"] >= 3,
    "few_vars": lambda p: p["n_vars"] <= 5,
    "many_vars": lambda p: p["n_vars"] >= 14,
    "const_line1": lambda p: p["chain"][0] == 0,
}


def run(lines: list[tuple[str, str]]) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Per variable after the last line: (value, the chain's line numbers from its constant on)."""
    env: dict[str, tuple[int, tuple[int, ...]]] = {}
    for i, (lhs, rhs) in enumerate(lines):
        value, chain = (int(rhs), ()) if rhs.isdigit() else env[rhs]
        env[lhs] = (value, (*chain, i))
    return env


def random_program(r: random.Random) -> dict | None:
    pool = r.sample(string.ascii_lowercase, r.randint(2, 26))
    p_const = r.uniform(0.15, 0.7)
    lines: list[tuple[str, str]] = []
    written: list[str] = []  # most recently written last
    for i in range(N_LINES):
        lhs = r.choice(pool)
        sources = [v for v in written if v != lhs]
        if i == 0 or not sources or r.random() < p_const:
            rhs = r.choice(string.digits)
        else:
            rhs = r.choice(sources[-3:]) if r.random() < 0.5 else r.choice(sources)
        lines.append((lhs, rhs))
        written = [v for v in written if v != lhs] + [lhs]
    query = r.choice(written)
    if len({rhs for _, rhs in lines if rhs.isdigit()}) < 2:
        return None  # one digit in the whole program: answerable without binding
    value, chain = run(lines)[query]
    return {
        "program": "\n".join(f"{a}={b}" for a, b in lines) + f"\n#{query}:",
        "answer": value,
        "hops": len(chain) - 1,
        "chain": chain,
        "q_writes": sum(lhs == query for lhs, _ in lines),
        "n_vars": len({lhs for lhs, _ in lines}),
    }


def draw(r: random.Random, keep, per_hop: int, max_draws: int = 100_000) -> list[dict]:
    """Up to `per_hop` programs per hop count 0-4 that `keep` accepts (rejection sampling, at most
    `max_draws` draws: a rare cell stays short, and the table's n says so)."""
    buckets: dict[int, list[dict]] = {h: [] for h in range(MAX_HOPS + 1)}
    for _ in range(max_draws):
        if min(map(len, buckets.values())) >= per_hop:
            break
        p = random_program(r)
        if p and p["hops"] <= MAX_HOPS and keep(p) and len(buckets[p["hops"]]) < per_hop:
            buckets[p["hops"]].append(p)
    return [p for h in buckets for p in buckets[h]]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", help="a step{N} directory of a binding run")
    ap.add_argument("--per-hop", type=int, default=100, help="programs per (variant, hop count)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok, r = load_checkpoint(args.checkpoint)[0], CharTokenizer(), random.Random(args.seed)
    rows = []
    for name, keep in VARIANTS.items():
        programs = pd.DataFrame(draw(r, keep, args.per_hop))
        data = encode_programs(programs["program"], programs["answer"], tok)
        correct = predict_answers(model, data, tok) == programs["answer"].to_numpy()
        rows.append(programs[["hops"]].assign(variant=name, correct=correct))
    scored = pd.concat(rows)
    table = scored.pivot_table(index="variant", columns="hops", values="correct", aggfunc="mean")
    table["all"] = scored.groupby("variant")["correct"].mean()
    table["n"] = scored.groupby("variant")["correct"].size()
    print(table.reindex(list(VARIANTS)).round(3).to_string())


if __name__ == "__main__":
    main()
