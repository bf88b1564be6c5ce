"""A paper-profile binding run in one GPU call (`python -m bench.gpu --only paper_binding`): seed 0 of
profiles/paper.yaml's binding model, trained on its distribution with its optimizer, precision, compile
and learning-rate schedule (105,469 steps) for as long as --paper-s allows, checkpointed on its
schedule; then the pipeline's own analyses of those checkpoints: the trajectory and its phases
(stages/binding/trajectory.py), residual-stream patching at every (layer, position) and heads per
dereference step (stages/binding/patching.py). Writes small tables, never the weights:

    run.json            steps reached, step rate, checkpoints, which were patched, where the time went
    trajectory.parquet  accuracy by hops and heuristic following per checkpoint, and the training loss
    phases.parquet      the three phases (detect_phases)
    patching.parquet    patch success by layer, position and chain depth; head_step_success by head

The learning rate follows the whole run's schedule, so a run stopped at step 45,000 is the paper's
run up to there, not a shorter run. Checkpoints are kept as copies on the device (151 MB each at the
paper's shape) and analysed after training: hooks and the eager model stay out of the compiled step.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from emergence.core.config import from_dict, section
from emergence.core.io import atomic_path, write_parquet
from emergence.core.models.registry import build_model
from emergence.core.train.config import TrainConfig
from emergence.core.train.loop import StepForward, _fast_matmuls, _make_optimizer, _train_step
from emergence.core.train.schedule import CheckpointPlan
from emergence.studies.binding.batches import encode_programs, sampler
from emergence.studies.binding.patching import head_step_table, make_counterfactual_pairs, patching_table
from emergence.studies.binding.programs import ProgramConfig
from emergence.studies.binding.sets import generate_table, load_data_params, split_sizes
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.train_config import model_params, train_params
from emergence.studies.binding.trajectory import detect_phases, training_rows, trajectory_table
from emergence.studies.binding.trajectory_params import PhaseParams

SEED = 0
CHUNK = 10_000  # programs per generator task: the programs do not depend on how many processes draw them
SPLITS = ("train", "val", "test")
# --smoke: a model small enough to learn easy programs in a few hundred CPU steps, so that the analyses
# have pairs it answers (patching counts only those) and every table gets rows
SMOKE_MODEL = dict(n_layers=2, d_model=64, n_heads=2, d_head=32, d_mlp=128)
SMOKE_PROGRAMS = dict(n_lines=4, max_hops=1)
SMOKE_TRAIN = dict(
    steps=240, batch_size=32, lr=5e-3, warmup_steps=20, n_log_checkpoints=5, checkpoint_every=120, precision="fp32"
)  # fp32: a CPU without bf16 instructions runs bf16 matmuls ~100x slower (docs/gpu.md)
SMOKE_SIZES = dict(n_programs=6000, chunk=1000, trajectory=300, pairs=48)  # chunks: the processes run here too
PAIRS = 256  # of the profile's 1,000: one checkpoint's patching is ~1 PFLOP at 256, so ~10 fit the budget


def _chunk(job: tuple[ProgramConfig, int, int, int]) -> pd.DataFrame:
    cfg, seed, i, n = job
    return generate_table(np.random.default_rng([seed, i]), cfg, n, set_name="main")


def generate_programs(
    cfg: ProgramConfig, n: int, seed: int, split: list[float], chunk: int = CHUNK
) -> tuple[pd.DataFrame, dict]:
    """`n` programs in chunks drawn by one process per core (fork: the parent has imported all the
    workers need), split into train / val / test as binding_data splits; and the generator's rate."""
    start, sizes = time.perf_counter(), [min(chunk, n - s) for s in range(0, n, chunk)]
    workers = min(os.cpu_count() or 1, len(sizes))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        table = pd.concat(pool.map(_chunk, [(cfg, seed, i, k) for i, k in enumerate(sizes)]), ignore_index=True)
    table["split"] = np.repeat(SPLITS, split_sizes(n, split))
    wall = time.perf_counter() - start
    return table, {"programs": n, "processes": workers, "s": wall, "programs_per_s": n / wall}


def setup(params: dict, device: str, smoke: bool) -> tuple[ProgramConfig, TrainConfig, str, dict, dict, PhaseParams]:
    """(program config, training config, arch, model config, sizes, phase params) of the paper profile
    (seed 0), with its base precision and compile; --smoke: tiny model, easy programs, few steps."""
    base = params["base"]
    data, program_cfg = load_data_params(params)
    fmt, _, _, cfg = train_params(params, SEED, device)
    cfg = dataclasses.replace(cfg, **{k: base[k] for k in ("precision", "compile", "compile_mode")})
    sizes = dict(
        n_programs=data.n_programs,
        trajectory=section(params, "binding_trajectory")["n_programs"],
        pairs=PAIRS,
        chunk=CHUNK,
        split=data.split,
        format=fmt,
    )
    if smoke:
        program_cfg = dataclasses.replace(program_cfg, **SMOKE_PROGRAMS)
        cfg = dataclasses.replace(cfg, **SMOKE_TRAIN, compile=False)
        sizes.update(SMOKE_SIZES)
    n_tokens = 4 * program_cfg.n_lines + 3  # `x=y\n` per line, then `#x:`
    arch, model_cfg = model_params(params, n_tokens, len(CharTokenizer()))
    if smoke:
        model_cfg.update(SMOKE_MODEL, dropout=0.0)
    phases = from_dict(PhaseParams, section(params, "binding_trajectory"), "binding_trajectory")
    return program_cfg, cfg, arch, model_cfg, sizes, phases


def train_until(model: torch.nn.Module, cfg: TrainConfig, batch_fn, deadline: float, device: str):
    """The training loop's own step under the whole run's lr schedule, until cfg.steps or `deadline`
    (perf_counter); a copy of the weights at every step of the checkpoint plan and at the last step
    reached. Returns (copies {step: state}, metrics, seconds of the first 50 steps: compile, the forward's path)."""
    plan = CheckpointPlan(cfg.steps, cfg.dense_until, cfg.n_log_checkpoints, cfg.checkpoint_every)
    forward, optimizer = StepForward(model, cfg, device, "paper_binding"), _make_optimizer(model, cfg, device)
    copies, rows, step, start, warm = {}, [], 0, time.perf_counter(), None

    def keep() -> None:
        copies[step] = {k: v.detach().clone() for k, v in model.state_dict().items()}

    with _fast_matmuls(device):
        while step < cfg.steps and time.perf_counter() < deadline:
            if step in plan:
                keep()
            stats, _ = _train_step(model, forward, optimizer, batch_fn, cfg, step, device)  # .item(): synced
            rows.append({"step": step, **stats})
            step += 1
            if step == 50:
                warm = time.perf_counter() - start
    keep()  # the last step reached: the run's "final" checkpoint
    return copies, pd.DataFrame(rows), warm, forward.path


def spread(n: int) -> list[int]:
    """0..n-1 ordered last first, then each the farthest from those before it: cut anywhere, the
    checkpoints patched so far cover the run evenly."""
    order = [n - 1]
    while len(order) < n:
        order.append(max((i for i in range(n) if i not in order), key=lambda i: (min(abs(i - o) for o in order), i)))
    return order


def _write(tables: Path | None, name: str, value: pd.DataFrame | dict) -> None:
    if tables is None:
        return
    if isinstance(value, dict):
        with atomic_path(tables / name) as tmp:
            tmp.write_text(json.dumps(value, indent=2) + "\n")
    else:
        write_parquet(value, tables / name)


def run(params: dict, budget_s: float, analysis_s: float, device: str, smoke: bool, tables: Path | None) -> dict:
    """The whole run in `budget_s` seconds: programs, training until `analysis_s` are left, the
    trajectory and phases at every checkpoint, then patching at as many checkpoints as the rest allows."""
    start = time.perf_counter()
    program_cfg, cfg, arch, model_cfg, sizes, phase_params = setup(params, device, smoke)
    programs, rate = generate_programs(program_cfg, sizes["n_programs"], SEED, sizes["split"], sizes["chunk"])
    tok = CharTokenizer()
    train_rows = programs[programs["split"] == "train"]
    test = programs[programs["split"] == "test"]
    torch.manual_seed(SEED)  # the initial weights, as train_binding draws them
    model = build_model(arch, model_cfg, "binding_model").to(device).train()
    batch_fn = sampler(encode_programs(train_rows["program"], train_rows["answer"], tok, sizes["format"]),
                       cfg.batch_size, SEED)  # fmt: skip
    began = time.perf_counter()
    copies, metrics, warm, path = train_until(model, cfg, batch_fn, start + budget_s - analysis_s, device)
    trained_s = time.perf_counter() - began
    steps = sorted(copies)
    summary = {
        "seed": SEED,
        "smoke": smoke,
        "generator": rate,
        "model": {k: model_cfg[k] for k in ("n_layers", "d_model", "n_heads", "d_mlp")},
        "precision": cfg.precision,
        "forward": path,
        "schedule_steps": cfg.steps,
        "steps": steps[-1],
        "train_s": trained_s,
        "compile_s": warm,  # the first 50 steps: compilation and CUDA-graph recording
        "step_ms": None if warm is None else 1e3 * (trained_s - warm) / max(1, steps[-1] - 50),
        "checkpoints": steps,
        "patched": [],
        "not_patched": [],
    }
    _write(tables, "run.json", summary)

    eager = build_model(arch, model_cfg, "binding_model").to(device).eval()

    def at(step: int) -> torch.nn.Module:
        eager.load_state_dict(copies[step])
        return eager

    sub = test.iloc[: sizes["trajectory"]]
    data = encode_programs(sub["program"], sub["answer"], tok)
    with _fast_matmuls(device):  # TF32 on a GPU: the analyses' argmax, not their last bits, is the result
        traj = trajectory_table(((s, at(s)) for s in steps), data, sub, tok, SEED)
        traj = pd.concat([traj, training_rows(metrics, SEED)], ignore_index=True)
        phases = detect_phases(traj, phase_params)
        summary["phases"] = phases[["phase", "name", "start_step", "end_step"]].to_dict("records")
        _write(tables, "trajectory.parquet", traj)
        _write(tables, "phases.parquet", phases)
        pairs = make_counterfactual_pairs(test, np.random.default_rng(SEED), sizes["pairs"], program_cfg.n_lines)
        patched, cost = [], 0.0  # the last checkpoint's seconds: the next is started only if as many are left
        for i in spread(len(steps)):
            step, began = steps[i], time.perf_counter()
            if began + cost > start + budget_s:
                summary["not_patched"].append(step)
                continue
            model = at(step)
            patched += [patching_table(model, pairs, tok, seed=SEED, step=step, batch_size=PAIRS),
                        head_step_table(model, pairs, tok, seed=SEED, step=step, batch_size=PAIRS)]  # fmt: skip
            summary["patched"].append(step)
            cost = time.perf_counter() - began
            _write(tables, "patching.parquet", pd.concat(patched, ignore_index=True))
            _write(tables, "run.json", {**summary, "wall_s": time.perf_counter() - start})
    summary["wall_s"] = time.perf_counter() - start
    _write(tables, "run.json", summary)
    return summary
