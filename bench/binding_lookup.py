"""Where binding training stalls: held-out accuracy by hop class and by line kind over steps.

    python bench/binding_lookup.py [--steps N --lines 2 16 --conv 0 --pos learned --layers 6 ...]

Trains the project's Transformer (by default the embedded default's: 6 layers,
d_model 64, 4 heads, RoPE, conv_kernel 4) on a pool of freshly generated
programs whose line counts are drawn uniformly from --lines (a length mixture;
16 16 is the default training distribution) and every --eval-every steps
prints, on held-out 16-line programs (the paper's length; ProgramConfig's default, balanced generator;
never trained on): accuracy overall
and per hop class, and the line-value accuracy at each newline split by line kind:
`const` (x=5), `copy1` (x=y, y assigned once so far), `copyN` (y reassigned).

--control K switches to the pure-lookup control instead: K constant lines with
distinct variables, then 4 queries answered in the text (`a=3\nb=7\n#a:3\n#b:7
...`), a target at every ':'; it prints the query accuracy on fresh programs.
A diagnostic, not a benchmark: it prints curves, no ratio.
"""

from __future__ import annotations

import argparse
import string
import tempfile
import time

import numpy as np
import torch

from emergence.core.models.registry import build_model
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import train
from emergence.studies.binding.batches import encode_programs, predict_answers, sampler
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import sample_program
from emergence.studies.binding.tokenizer import CharTokenizer

LINE_KINDS = ("const", "copy1", "copyN")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--lines", type=int, nargs=2, default=(16, 16), metavar=("MIN", "MAX"))
    ap.add_argument(
        "--ramp",
        type=int,
        default=0,
        help="curriculum: the longest program allowed grows from MIN to MAX lines over this many steps",
    )
    ap.add_argument("--max-hops", type=int, default=4)
    ap.add_argument("--pool", type=int, default=20000, help="training programs (sampled with replacement)")
    ap.add_argument("--format", default="line_values")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--pos", default="rope")
    ap.add_argument("--conv", type=int, default=4, help="conv_kernel (0 = plain GPT-2)")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-programs", type=int, default=500)
    ap.add_argument("--control", type=int, default=0, metavar="K", help="pure-lookup control with K lines")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


def programs(rng: np.random.Generator, n: int, lines: tuple[int, int], max_hops: int) -> list:
    out = []
    for _ in range(n):
        n_lines = int(rng.integers(lines[0], lines[1] + 1))
        out.append(sample_program(rng, ProgramConfig(n_lines=n_lines, max_hops=min(max_hops, n_lines - 1))))
    return out


def line_kinds(prog) -> list[str]:
    """Kind of every assignment line, in order (see module docstring)."""
    writes: dict[str, int] = {}
    kinds = []
    for lhs, rhs in prog.lines:
        kinds.append("const" if rhs.isdigit() else ("copy1" if writes.get(rhs, 0) == 1 else "copyN"))
        writes[lhs] = writes.get(lhs, 0) + 1
    return kinds


def line_accuracy(model, progs, tok: CharTokenizer) -> dict[str, float]:
    """Accuracy of the newline predictions (line_values targets) per line kind."""
    with torch.no_grad():
        data = encode_programs([p.text for p in progs], [p.answer for p in progs], tok, "line_values")
        logits, _ = model(data.idx)  # (N, T, V)
        hits = {k: [] for k in LINE_KINDS}
        for i, p in enumerate(progs):
            where = torch.nonzero(data.targets[i] >= 0).flatten()[:-1]  # newlines; the last target is the answer
            ok = (logits[i, where].argmax(-1) == data.targets[i, where]).tolist()
            for kind, hit in zip(line_kinds(p), ok):
                hits[kind].append(hit)
        return {k: float(np.mean(v)) if v else float("nan") for k, v in hits.items()}


def control_batch(rng: np.random.Generator, n: int, k: int, tok: CharTokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """(idx, targets) of n pure-lookup programs with k lines and 4 answered queries (module docstring)."""
    texts = []
    for _ in range(n):
        names = [string.ascii_lowercase[v] for v in rng.choice(26, k, replace=False)]
        values = rng.integers(0, 10, k)
        lines = [f"{x}={d}" for x, d in zip(names, values)]
        lines += [f"#{names[q]}:{values[q]}" for q in rng.integers(0, k, 4)]
        texts.append("\n".join(lines))
    idx = torch.from_numpy(tok.encode_batch(texts)).long()  # (n, T)
    targets = torch.full_like(idx, -1)
    colon = idx == tok.encode(":")[0]
    targets[:, :-1][colon[:, :-1]] = idx[:, 1:][colon[:, :-1]]  # ':' predicts the digit after it
    return idx, targets


def curriculum(data, n_lines: np.ndarray, a: argparse.Namespace):
    """batch_fn drawing only programs of at most MIN + (MAX - MIN) * step / ramp lines."""
    if not a.ramp:
        return sampler(data, a.batch, a.seed)

    def batch_fn(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        cap = a.lines[0] + (a.lines[1] - a.lines[0]) * min(1.0, step / a.ramp)
        eligible = np.flatnonzero(n_lines <= cap)
        ix = torch.from_numpy(np.random.default_rng([a.seed, step]).choice(eligible, a.batch))
        return data.idx[ix], data.targets[ix]

    return batch_fn


def build(a: argparse.Namespace, tok: CharTokenizer) -> torch.nn.Module:
    torch.manual_seed(a.seed)
    return build_model(
        "transformer",
        dict(
            n_layers=a.layers,
            d_model=a.d_model,
            n_heads=a.heads,
            d_head=a.d_model // a.heads,
            d_mlp=4 * a.d_model,
            n_ctx=128,
            d_vocab=len(tok),
            pos=a.pos,
            act="gelu",
            dropout=0.0,
            conv_kernel=a.conv,
        ),
    )


def run(a: argparse.Namespace, model: torch.nn.Module, batch_fn, eval_fn) -> None:
    cfg = TrainConfig(
        steps=a.steps,
        batch_size=a.batch,
        lr=a.lr,
        weight_decay=0.01,
        schedule="linear",
        warmup_steps=a.warmup,
        seed=a.seed,
        n_log_checkpoints=0,
        eval_every=a.eval_every,
        device="cpu",
    )
    with tempfile.TemporaryDirectory() as tmp:
        train(model, batch_fn, cfg, out_dir=f"{tmp}/run", scratch_dir=f"{tmp}/scratch", eval_fn=eval_fn, progress=False)


def main_control(a: argparse.Namespace, tok: CharTokenizer) -> None:
    test_idx, test_targets = control_batch(np.random.default_rng(10_000 + a.seed), a.eval_programs, a.control, tok)
    start = time.time()
    print(f"{'step':>6} {'s':>5} {'acc':>5}", flush=True)

    def eval_fn(model: torch.nn.Module, step: int) -> dict[str, float]:
        with torch.no_grad():
            logits, _ = model(test_idx)
        where = test_targets >= 0
        acc = float((logits.argmax(-1)[where] == test_targets[where]).float().mean())
        print(f"{step:6d} {time.time() - start:5.0f} {acc:5.3f}", flush=True)
        return {"accuracy": acc}

    run(
        a,
        build(a, tok),
        lambda step: control_batch(np.random.default_rng([a.seed, step]), a.batch, a.control, tok),
        eval_fn,
    )


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    tok = CharTokenizer()
    if a.control:
        return main_control(a, tok)
    rng = np.random.default_rng(a.seed)
    pool = programs(rng, a.pool, tuple(a.lines), a.max_hops)
    held_out = programs(np.random.default_rng(10_000 + a.seed), a.eval_programs, (16, 16), 4)
    data = encode_programs([p.text for p in pool], [p.answer for p in pool], tok, a.format)
    test = encode_programs([p.text for p in held_out], [p.answer for p in held_out], tok)
    hops = np.array([p.hops for p in held_out])
    start = time.time()
    print(
        f"{'step':>6} {'s':>5} {'acc':>5} "
        + " ".join(f"h{h}".rjust(5) for h in range(5))
        + " "
        + " ".join(k.rjust(6) for k in LINE_KINDS),
        flush=True,
    )

    def eval_fn(model: torch.nn.Module, step: int) -> dict[str, float]:
        model.eval()
        hit = predict_answers(model, test, tok) == test.answers.numpy()
        by_hop = [hit[hops == h].mean() if (hops == h).any() else float("nan") for h in range(5)]
        kinds = line_accuracy(model, held_out[:200], tok)
        model.train()
        print(
            f"{step:6d} {time.time() - start:5.0f} {hit.mean():5.3f} "
            + " ".join(f"{x:5.2f}" for x in by_hop)
            + " "
            + " ".join(f"{kinds[k]:6.2f}" for k in LINE_KINDS),
            flush=True,
        )
        return {"accuracy": float(hit.mean())}

    run(a, build(a, tok), curriculum(data, np.array([len(p.lines) for p in pool]), a), eval_fn)


if __name__ == "__main__":
    main()
