"""How long the pipeline will take here, said by `python -m emergence check` (so by `make repro` and
`make snakemake`) before anything runs: per study and in total, from this machine's measured rates.

Each stage instance costs, in seconds:

    start + engine + steps x (STEP_S + FLOPs per step / rate) + analysis FLOPs / rate
          + CKPT_S x checkpoints read + LLC_CHAIN_S x SGLD chains

- start: a stage process's start (interpreter, torch, pandas and the project imported, params checked),
  measured here by running that in a subprocess (`measure`).
- engine: what the engine spends per stage besides the stage (DVC hashes the deps and rewrites
  dvc.lock after each stage; Snakemake stats files and starts a shell job): ENGINE_S.
- steps: the training steps of a stage that trains (resources.py's workload of its declared params;
  binding programs are shorter than n_ctx: `binding_context`), at the FLOP rate measured here by timing
  real training steps of the zoo's Transformer for about two seconds (`measure`).
- analysis: what a stage that reads checkpoints computes (`analysis`), from the params: the checkpoints
  its run saves (its CheckpointPlan) times the sequences it passes through the run's model at its shape
  (2 FLOPs a weight a token forward, 3 times that with a backward pass; a Mamba-2 pads to whole chunks
  and runs MAMBA times slower), or for an association run V x V weights (ASSOC_V3 V^3 a comparison with
  the closed forms). The constants say which measurement gave them (docs/bench.md);
  tests/unit/test_estimate.py holds the estimate against the runs recorded in bench/estimate_runs.json.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from emergence.core.declared import instances, interpolate
from emergence.core.pipeline import engine_declaration
from emergence.core.resources import STEP_S, AttnOnlyWorkload, Workload, job_workload, on_device
from emergence.core.train.schedule import CheckpointPlan

# per stage instance, besides the stage: DVC 3.67 rewrites dvc.lock and hashes deps (a tiny run's wall time
# less its records' wall times, per stage: 3.8 s on 2026-12-05, 4.4 s on 2026-12-06 beside other work);
# Snakemake 9 starts a shell job: 1.0 s assumed, not yet measured
ENGINE_S = {"dvc": 3.9, "snakemake": 1.0}
# Analyses (every stage that reads checkpoints): the FLOPs of the forward (and backward) passes its params
# ask for through its model at its shape (`analysis`), at the measured training FLOP rate (the default
# run's four binding analyses, 471 s recorded, take 1.2x that; its grounding ones about 1x), plus:
CKPT_S = 0.08  # a checkpoint read (load, rebuild, per-call work outside the matmuls): the default run's
# grounding_template_gain@transformer4 and lstm4, 22 checkpoints each in 1.4 to 2.1 s past the start
MAMBA = 2.0  # Mamba-2 seconds per FLOP over the Transformer's, beside its padding to whole chunks: the paper
# smoke's mamba12 / transformer12 at d_model 768 (gain 94 / 16 s, padded 64 / 16 tokens: 1.5; lens 206 / 53 s
# at 256 tokens: 3.9); training is left at 1 (the default's mamba4 trains 2.2x the Transformer's 49 s)
LLC_CHAIN_S = 1.5  # an SGLD chain's set-up per checkpoint: binding_llc's 15 to 20 s past its FLOPs for 6 to 8
# chains (tiny run, paper smoke), grounding_llc's 4 to 12 s for 4
ASSOC_V3 = 3.0  # V x V products per weight a comparison with the closed forms costs (V^3 FLOPs each):
# the paper smoke's assoc_compare@3-42, 106 s for 4 checkpoints x 2 bases x 7 weights at |V| = 3000
FP64 = 2.0  # assoc_order trains in float64: half the float32 rate
EVAL_TOKENS = 16  # a held-out grounding context, right-padded to its batch's longest (7 tokens on average)
STRESS_SETS = 11  # binding_stress's suite: 9 stress and 2 reference sets, stress_per_hop programs per hop count
STUDIES = {"binding": "binding", "assoc": "associations", "grounding": "grounding", "childes": "grounding",
           "visual": "visual", "visdial": "visual", "dino": "visual"}  # fmt: skip
PROBE = Workload(n_layers=8, d_model=64, d_mlp=256, d_attn=64, n_heads=4, context=64, batch=32, steps=1)
STARTUP = "import torch, pandas, pyarrow.parquet; from emergence.check import load_schemas; load_schemas(Path('.'))"


@dataclass(frozen=True)
class Rates:
    """What this machine does: training FLOP/s at the run's thread count, and a stage's start in seconds."""

    flops: float
    start_s: float


def measure(threads: int, root: Path = Path("."), seconds: float = 2.0) -> Rates:
    """Time real training steps of the zoo's Transformer at a binding-like shape (`PROBE`) for about
    `seconds` on `threads` threads, and one stage start in a subprocess."""
    import torch  # here, not at the top: the params rules import this module, and only timing needs torch

    from emergence.core.models.registry import build_model

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        w = PROBE
        config = dict(n_layers=w.n_layers, d_model=w.d_model, n_heads=w.n_heads, d_head=w.d_attn // w.n_heads,
                      d_mlp=w.d_mlp, n_ctx=w.context, d_vocab=64)  # fmt: skip
        model = build_model("transformer", config)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randint(0, 64, (w.batch, w.context), generator=torch.Generator().manual_seed(0))
        n, began = 0, 0.0
        while n < 3 or time.perf_counter() - began < seconds:
            if n == 2:  # two warm-up steps
                began = time.perf_counter()
            _, loss = model(x, x)
            opt.zero_grad()
            loss.backward()
            opt.step()
            n += 1
        step = (time.perf_counter() - began) / (n - 2)
    finally:
        torch.set_num_threads(before)
    code = f"from pathlib import Path; {STARTUP}"
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True)  # its time, whatever it says
    start = time.perf_counter() - began
    return Rates(flops=w.flops_per_step / max(step - STEP_S, 1e-6), start_s=start)


def study_of(instance: str) -> str:
    """The study a stage instance belongs to, as the index page groups them."""
    return STUDIES.get(instance.split("_")[0], "pipeline")


def binding_context(params: dict, keys: list[str], w: Workload) -> Workload:
    """A binding batch is as long as its programs, not n_ctx: a line is 4 characters (`a=1` and a
    newline), the query (`#a:`) and the answer 4 more."""
    if not any(k == "binding_programs" or k.startswith("binding_programs.") for k in keys):
        return w
    tokens = 4 * params["binding_programs"]["n_lines"] + 4
    return Workload(**{**w.__dict__, "context": min(w.context, tokens)})


def plan_count(train: dict, steps: int | None = None, every: int | None = None) -> int:
    """The checkpoints a training section saves (its CheckpointPlan), steps and every overridable."""
    return plan_of(train, steps, every).count()


def plan_of(train: dict, steps: int | None = None, every: int | None = None) -> CheckpointPlan:
    steps = train["steps"] if steps is None else steps
    every = train.get("checkpoint_every", 0) if every is None else every
    return CheckpointPlan(steps, train.get("dense_until", 0), train.get("n_log_checkpoints", 20), every)


def kth(n: int, k: int) -> int:
    """How many of n checkpoints every k-th keeps, the first and the last always (llc.every_kth)."""
    return math.ceil(n / k) + ((n - 1) % k != 0)


def forward(model: dict, context: int, sequences: float) -> float:
    """FLOPs of `sequences` forward passes of `context` tokens through a zoo model (a grounding_models
    entry or binding_model): 2 FLOPs a weight a token and the attention scores (resources.Workload, a
    third of a training step). Mamba-2 pads a sequence to whole chunks and runs MAMBA times slower."""
    d, n_heads = model["d_model"], model.get("n_heads", 1)
    chunk = model.get("chunk_size", 0) if model.get("arch") == "mamba2" else 0
    if chunk:
        context = chunk * math.ceil(context / chunk)
    d_attn = n_heads * model.get("d_head", d // n_heads)
    w = Workload(model["n_layers"], d, model.get("d_mlp", 4 * d), d_attn, n_heads, context, batch=1, steps=1)
    return sequences * w.flops_per_step / 3 * (MAMBA if chunk else 1.0)


def binding_flops(family: str, params: dict, item: dict) -> tuple:
    """(FLOPs, checkpoints read) of a binding analysis: programs of 4 n_lines + 4 tokens."""
    m, data = params["binding_model"], params["binding_data"]
    T, L, H = min(4 * params["binding_programs"]["n_lines"] + 4, m["n_ctx"]), m["n_layers"], m["n_heads"]
    hops = params["binding_programs"]["max_hops"]
    n = plan_count(params["binding_train"])
    traj, pairs = params["binding_trajectory"]["n_programs"], params["binding_patching"]["n_pairs"]
    if family == "binding_trajectory":  # every checkpoint on the test programs
        return forward(m, T, (n + 1) * traj), n + 1
    if family == "binding_patching":  # a run per (layer, position) patched, and per (layer, head, hop)
        return forward(m, T, pairs * ((L + 1) * T + L * H * hops)), 1
    if family == "binding_aid_eval":  # the aid run's trajectory and its position patching
        return forward(m, T, (n + 1) * traj + pairs * (L + 1) * T), n + 1
    if family == "binding_ablation":  # one head ablated at a time, per mode
        p = params["binding_ablation"]
        return forward(m, T, p["n_programs"] * (1 + L * H * len(p["modes"]) + ("mean" in p["modes"]))), 1
    if family == "binding_stress":  # the suite at every curve_every-th step, the grid at the named one
        every, t = params["binding_stress"]["curve_every"], params["binding_train"]
        steps = 1 + sum(s % every == 0 for s in plan_of(t) if s < t["steps"]) if every else 1
        suite = STRESS_SETS * data["stress_per_hop"] * (hops + 1)
        (l0, l1), (h0, h1) = data["gen_lines"], data["gen_hops"]
        return forward(m, T, steps * suite + data["gen_per_cell"] * (l1 - l0 + 1) * (h1 - h0 + 1)), steps
    if family == "binding_llc":
        return llc_flops(params, m, T, n)
    return 0.0, 0


def llc_flops(params: dict, model: dict, context: int, saved: int) -> tuple:
    """SGLD: per kept checkpoint, chains x draws steps of a batch forward and backward."""
    p = params["llc"]
    k = kth(saved, p["every"])
    return 3 * forward(model, context, k * p["num_chains"] * p["num_draws"] * p["batch_size"]), k, k * p["num_chains"]


def grounding_flops(family: str, params: dict, item: dict, root: Path) -> tuple:
    """(FLOPs, checkpoints read) of a grounding or visual analysis of one run."""
    study, what = family.split("_", 1)
    model = {**params["grounding_models"][item["model"]]}
    train = params[f"{study}_train"]
    n = plan_count(train)
    words = params[f"{study}_vocab"]["n_words"] * params[f"{study}_eval"]["max_per_word"]  # held-out contexts
    pairs = words * (1 + params[f"{study}_eval"]["n_mismatched"])
    if what == "gain":
        return forward(model, EVAL_TOKENS, n * pairs), n
    if what == "template_gain":
        return forward(model, EVAL_TOKENS, n * templates(params, root) * params["grounding_vocab"]["n_words"]), n
    if what == "saliency":  # a backward pass per matched context
        return 3 * forward(model, EVAL_TOKENS, n * words), n
    if what == "ablation":  # the heads found ablated, then n_draws same-layer control sets
        return forward(model, EVAL_TOKENS, n * (1 + params[f"{study}_ablation"]["n_draws"]) * words), n
    if what == "lens":  # per lens: its training batches, the KL windows and the pairs, tuned and logit
        p, T = params["grounding_lens"], train["seq_len"]
        k = min(p["n_checkpoints"], n)
        windows = forward(model, T, p["steps"] * p["batch_size"] + 2 * p["kl_windows"])
        return k * (windows + 2 * forward(model, EVAL_TOKENS, pairs)), k
    if what == "llc":
        return llc_flops(params, model, train["seq_len"], n)
    return 0.0, 0


def templates(params: dict, root: Path) -> int:
    """The carrier templates grounding_template_gain reads each target in (its source's data lines)."""
    path = root / params["paths"]["grounding_template_source"]
    if not path.is_file():
        return 30
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return sum(1 for line in lines if line.strip() and not line.startswith("#"))


def assoc_flops(family: str, params: dict, item: dict) -> tuple:
    """(FLOPs, checkpoints read) of an association analysis: V x V weights, so a checkpoint's comparison
    with the closed forms is ASSOC_V3 V^3 a weight and basis, and a forward pass is the AttnOnlyWorkload's."""
    c, t = params["assoc_corpus"], params["assoc_train"]
    V, N = c["vocab_size"], c["max_sequences"]
    L = item.get("layers", params["assoc_order"]["n_layers"])
    weights = 2 * L + 1
    if family == "assoc_compare":
        per_epoch = max(N // (t.get("batch_size", 0) or N), 1) if N else 1
        n = plan_count(t, t["epochs"] * per_epoch, round(t.get("checkpoint_every_epochs", 0) * per_epoch))
        return n * 2 * weights * ASSOC_V3 * V**3, n  # against two bases
    if family == "assoc_causal":  # the loss with each weight's direction removed
        seqs = params["assoc_causal"]["n_sequences"] or N
        w = AttnOnlyWorkload(n_layers=L, d_vocab=V, context=c["seq_len"], batch=seqs, steps=1, dtype_bytes=4)
        return (weights + 1) * w.flops_per_step / 3 + weights * ASSOC_V3 * V**3, 1
    if family == "assoc_order":  # float64 full-batch runs, every step compared
        p = params["assoc_order"]
        T, seqs = c["seq_len"], p["n_sequences"]
        w = AttnOnlyWorkload(n_layers=L, d_vocab=V, context=T, batch=seqs, steps=1, dtype_bytes=8)
        runs = len(p["etas"]) * p["steps"]
        return FP64 * runs * (w.flops_per_step + weights * ASSOC_V3 * V**3), runs
    if family == "assoc_basis":
        return ASSOC_V3 * V**3, 0
    return 0.0, 0


class Analysis(NamedTuple):
    """What a stage instance's analysis computes: FLOPs, checkpoints read and SGLD chains run."""

    flops: float = 0.0
    checkpoints: int = 0
    chains: int = 0

    def seconds(self, rates: Rates) -> float:
        return self.flops / rates.flops + CKPT_S * self.checkpoints + LLC_CHAIN_S * self.chains


def analysis(instance: str, item: dict, params: dict, root: Path) -> Analysis:
    """A stage instance's analysis; none for a stage that reads no checkpoint."""
    family = instance.split("@")[0]
    if family.startswith("binding_"):
        return Analysis(*binding_flops(family, params, item))
    if family.startswith(("grounding_", "visual_")) and "model" in item:
        return Analysis(*grounding_flops(family, params, item, root))
    if family.startswith("assoc_"):
        return Analysis(*assoc_flops(family, params, item))
    return Analysis()


def _instances(params: dict, root: Path) -> Iterator[tuple[str, dict, Workload | None]]:
    for name, stage in engine_declaration(root)["stages"].items():
        for instance, item in instances(name, stage, params):
            keys = interpolate(stage.get("params", []), {**params, "item": item}, instance)
            w = job_workload(params, keys, instance, item) if on_device(keys) else None
            yield instance, item, binding_context(params, keys, w) if isinstance(w, Workload) else w


def jobs(params: dict, root: Path) -> Iterator[tuple[str, str, Workload | None]]:
    """(instance, study, its training workload; None for a stage that does not train) of every instance."""
    for instance, _, w in _instances(params, root):
        yield instance, study_of(instance), w


def estimate(params: dict, root: Path, rates: Rates, engine: str = "dvc") -> dict[str, dict[str, float]]:
    """Per study: its stage instances, its training, analysis and total seconds here."""
    out: dict[str, dict[str, float]] = {}
    for instance, item, w in _instances(params, root):
        s = out.setdefault(study_of(instance), {"stages": 0, "training_s": 0.0, "analysis_s": 0.0, "total_s": 0.0})
        train = 0.0 if w is None else w.steps * (STEP_S + w.flops_per_step / rates.flops)
        spent = analysis(instance, item, params, root).seconds(rates)
        s["stages"] += 1
        s["training_s"] += train
        s["analysis_s"] += spent
        s["total_s"] += rates.start_s + ENGINE_S[engine] + train + spent
    return out


def minutes(seconds: float) -> str:
    return f"{seconds / 60:,.0f} min" if seconds < 5940 else f"{seconds / 3600:,.1f} h"


def lines(params: dict, root: Path, rates: Rates, engine: str = "dvc") -> list[str]:
    """What check prints: the rates it measured, each study's estimate and the total."""
    per = estimate(params, root, rates, engine)
    total = sum(s["total_s"] for s in per.values())
    head = (
        f"estimated time here ({engine}; measured {rates.flops / 1e9:,.0f} GFLOP/s a training step on "
        f"{params['base']['threads']} thread(s), {rates.start_s:.1f} s a stage start):"
    )
    rows = [
        f"  {study:<12} {minutes(s['total_s']):>8}  ({s['stages']} stage runs; training {minutes(s['training_s'])}, "
        f"analyses {minutes(s['analysis_s'])})"
        for study, s in sorted(per.items(), key=lambda kv: -kv[1]["total_s"])
    ]
    tail = "±50 % on the default, tiny and paper smoke runs: docs/bench.md"
    return [head, *rows, f"  {'total':<12} {minutes(total):>8}  ({tail})"]
