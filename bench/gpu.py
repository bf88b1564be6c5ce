"""GPU check: the paper-scale models' training throughput on one device, like for like with HF GPT-2,
a paper-profile binding run, and Mamba-2's fused kernels against its torch path.

    make gpu-check                              # python -m bench.gpu: on a GPU machine, <= 9 minutes
    python -m bench.gpu --device cpu --smoke    # the same code on a CPU at tiny shapes (the unit test)

Writes reports/gpu_check.json and the section of docs/bench.md between its markers. It fetches
nothing: it needs only torch, transformers and this project (docs/gpu.md says how to carry them and
mamba-ssm onto a machine with no registry).

Every throughput is a median over timed rounds after warm-up (and after compilation): tokens/s of
AdamW training steps (forward, backward, step) on one random batch. FLOPs of a step are counted by
torch's FlopCounterMode (matmuls and attention, not AdamW), so TFLOP/s = FLOPs x steps/s and MFU =
TFLOP/s / the device's dense bf16 peak (PEAK_BF16, by name; else a measured 8192^3 bf16 matmul).
Peak memory is torch's max allocated on the device, beside resources.py's state + activation bytes.
Rows run in priority order until --budget-s is spent; a row left over says "not measured: budget".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch

from bench import paper_binding
from bench.gpu_rows import (
    BINDING_STEPS,
    arch_row,
    binding_run,
    hf_gpt2_rows,
    mamba_check,
    paper_params,
    peak_flops,
    seeds_on_one_device,
    specs,
    step_profile,
    torch_path_row,
    worker,
)
from bench.pins import unpinned, version_record
from emergence.core.io import atomic_path

MARKERS = ("<!-- gpu-check:start -->", "<!-- gpu-check:end -->")
ACT_NAMES = {"gelu": "erf GELU", "gelu_tanh": "tanh GELU", "relu": "ReLU"}
TASKS = ("binding_run", "hf_gpt2", "mamba_kernels", "step_profile", "seeds_per_device", "architectures")
LISTS = ("binding_run", "architectures")  # one row per mode or shape; the others are one measurement each
OPT_IN = ("paper_binding",)  # a whole GPU call of its own: run only when --only names it
# The pinned packages a row's numbers go through besides torch (HF's models): a row is marked on the page
# when one of them is not at its pin on the machine.
THROUGH_HF = ("transformers",)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes and few steps: the code path, not numbers")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting rows after this many seconds")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--binding-s", type=float, default=90.0, help="seconds of the paper-profile binding run")
    ap.add_argument("--out", type=Path, help="the JSON (default reports/gpu_check.json; none with --smoke)")
    ap.add_argument(
        "--doc", type=Path, help="the page whose section is written (default docs/bench.md; none with --smoke)"
    )
    ap.add_argument(
        "--only", help=f"comma-separated measurements, of {','.join(TASKS + OPT_IN)} (default: all but {OPT_IN[0]})"
    )
    ap.add_argument(
        "--seed-counts",
        default="1,2,4,6",
        help="K of the seeds-per-device rows; K=1, their reference, always runs (--smoke: 1,2)",
    )
    ap.add_argument(
        "--compile-modes",
        default="default,reduce-overhead",
        help="torch.compile modes of the binding run, one run each (--smoke: none, it runs eager)",
    )
    ap.add_argument("--paper-s", type=float, default=540.0, help="paper_binding: seconds of the whole run")
    ap.add_argument(
        "--analysis-s", type=float, default=120.0, help="paper_binding: of those, seconds kept for the analyses"
    )
    ap.add_argument(
        "--tables", type=Path, help="paper_binding: its tables (default reports/paper_binding; none with --smoke)"
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one of K seeds sharing the device
    return ap.parse_args(argv)


def cpu_name() -> str:
    models = [line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")]
    return f"CPU: {models[0] if models else platform.machine()}, {os.cpu_count()} cores"


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def run(a: argparse.Namespace, save: Callable[[dict], None] = lambda result: None) -> dict:
    """Every measurement, in priority order, until the budget is spent; `save` gets the result so far
    after each one (a device call cut off at its limit still leaves the rows it finished)."""
    start, device = time.perf_counter(), a.device
    params = paper_params()
    all_specs = specs(params, a.smoke)
    binding, mamba = all_specs[0], all_specs[2]
    peak, peak_from = peak_flops(device)
    result = {
        "device": torch.cuda.get_device_name(device) if torch.device(device).type == "cuda" else cpu_name(),
        "versions": version_record(),
        "peak_bf16_tflops": peak / 1e12 if peak else None,
        "peak_from": peak_from,
        "smoke": a.smoke,
        "architectures": [],
        "binding_run": [],
        "not_measured": [],
        "task_s": {},  # where the time went
    }
    combos = [("bf16", False), ("fp32", False), ("bf16", True), ("fp32", True)]  # eager rows take seconds each
    modes = ["default"] if a.smoke else a.compile_modes.split(",")
    tasks: list[tuple[str, str, Callable[[], object]]] = [  # (result key, label, measurement)
        *(
            ("binding_run", f"binding_run {mode}", lambda m=mode: binding_run(params, a, device, a.smoke, m))
            for mode in modes
        ),
        ("hf_gpt2", "hf_gpt2", lambda: hf_gpt2_rows(binding, a, device, (False,) if a.smoke else (False, True))),
        ("mamba_kernels", "mamba_kernels", lambda: mamba_check(mamba, device)),  # seconds: before the minutes below
        (
            "step_profile",
            "step_profile",
            lambda: step_profile(
                binding, params["base"]["precision"], params["base"]["compile"] and not a.smoke, a, device
            ),
        ),
        (
            "seeds_per_device",
            "seeds_per_device",
            lambda: seeds_on_one_device(a, device, (1, 2) if a.smoke else tuple(map(int, a.seed_counts.split(",")))),
        ),
        (
            "paper_binding",
            "paper_binding",
            lambda: paper_binding.run(
                params,
                a.paper_s,
                a.analysis_s,
                device,
                a.smoke,
                a.tables or (None if a.smoke else Path("reports/paper_binding")),
            ),
        ),
    ]
    for precision, compiled in combos:
        for spec in all_specs:
            if a.smoke and compiled and (spec is not binding or precision != "bf16"):
                result["not_measured"].append(
                    f"{spec.name} {precision} compiled: --smoke compiles the binding GPT-2 in bf16 only"
                )
                continue
            label = f"{spec.name} {precision} {'compiled' if compiled else 'eager'}"
            tasks.append(
                ("architectures", label, lambda s=spec, p=precision, c=compiled: arch_row(s, p, c, a, device, peak))
            )
        if precision == "bf16" and not compiled:
            label = f"{mamba.name} (torch path) bf16 eager"
            tasks.append(("architectures", label, lambda: torch_path_row(mamba, a, device, peak)))
    only = set(a.only.split(",")) if a.only else set(TASKS)
    if unknown := only - set(TASKS + OPT_IN):
        known = ", ".join(TASKS + OPT_IN)
        raise SystemExit(f"--only: unknown measurement(s) {', '.join(sorted(unknown))}; known: {known}")
    for key, label, task in tasks:
        if key not in only:
            continue
        if time.perf_counter() - start > a.budget_s:
            result["not_measured"].append(f"{label}: budget of {a.budget_s:.0f} s spent")
            continue
        began = time.perf_counter()
        try:
            value = task()
        except Exception as e:  # noqa: BLE001 - one failed measurement must not lose the others (one GPU call)
            result["not_measured"].append(
                f"{label}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            )
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            continue
        finally:
            now = time.perf_counter()
            result["task_s"][label], result["wall_s"] = round(now - began, 1), now - start
            save(result)
        if key in LISTS:
            result[key].append(value)
        else:
            result[key] = value
        save(result)
    save(result)  # with the rows the budget left out
    return result


def _run(row: dict) -> str:
    """(run N) for a row of a report put together from several runs."""
    return f" (run {row['call']})" if "call" in row else ""


def _fmt(x: float | None, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def versions_line(v: dict) -> str:
    """The machine's versions against constraints.txt: every difference named, torch's as expected."""
    diffs = "; ".join(
        f"{d['package']} {d['machine'] or 'absent'} (pinned {d['pinned']}"
        + (f"; expected: {d['expected']})" if d["expected"] else ")")
        for d in v["differences"]
    )
    same = len(v["packages"]) - len(v["differences"])
    extras = ", ".join(f"{k} {val}" for k, val in v["extras"].items())
    return (
        f"Versions: Python {v['python']}; {same} pinned packages at their pins (constraints.txt); "
        f"not at their pins: {diffs or 'none'}; unpinned: {extras}."
    )


def _unpinned(result: dict, packages: tuple[str, ...]) -> str:
    """' [unpinned: ...]' for a row measured through a package the machine has at another version than its pin."""
    names = unpinned(result["versions"], packages)
    return f" [unpinned: {', '.join(names)}]" if names else ""


def paper_binding_line(pb: dict) -> str:
    """One line of the page for the paper binding run (its tables hold the results)."""
    phases = ", ".join(
        f"{p['name']} " + ("not reached" if p["start_step"] < 0 else f"from step {p['start_step']:,}")
        for p in pb.get("phases", [])
    )
    g, step_ms = pb["generator"], _fmt(pb["step_ms"], ".1f")
    return (
        f"- Paper binding run (seed {pb['seed']}, {pb['precision']}, {pb['forward']}): {pb['steps']:,} of "
        f"{pb['schedule_steps']:,} steps in {pb['train_s']:.0f} s ({step_ms} ms a step after "
        f"{_fmt(pb['compile_s'], '.0f')} s for the first 50); {len(pb['checkpoints'])} checkpoints, "
        f"{len(pb['patched'])} patched; phases: {phases or 'not detected'}; {g['programs']:,} programs drawn at "
        f"{g['programs_per_s']:,.0f}/s by {g['processes']} processes."
    )


def render(result: dict) -> str:
    """The docs/bench.md section: the targets first, then every architecture row."""
    lines = [
        MARKERS[0],
        "",
        f"## GPU check: {result['device']}{' (smoke: code path only)' if result['smoke'] else ''}",
        "",
    ]
    lines.append(versions_line(result["versions"]))
    hf = _unpinned(result, THROUGH_HF)
    peak = result["peak_bf16_tflops"]
    lines += ["", f"MFU is against {_fmt(peak, '.0f')} TFLOP/s dense bf16 ({result['peak_from']}).", ""]
    for b in result.get("binding_run", []):
        mode = f"compiled, mode {b.get('compile_mode') or 'default'}" if b["compiled"] else "eager"
        lines.append(
            f"- One paper-scale binding seed ({BINDING_STEPS:,} steps, {b['precision']}, "
            f"{mode}): {b['predicted_seed_min']:.1f} min predicted (target <= 30) "
            f"from {b['steps']} steps at {b['step_s'] * 1e3:.1f} ms; loss {b['first_loss']:.3f} -> "
            f"{b['last_loss']:.3f}, held-out accuracy {b['held_out_accuracy']:.3f} ({b['note']}){_run(b)}."
        )
    for r in result.get("hf_gpt2", []):
        lines.append(
            f"- Paper-shape GPT-2, bf16 {'compiled' if r['compiled'] else 'eager'}: ours {r['ours_tokens_per_s']:,.0f} "
            f"tokens/s vs HF GPT2LMHeadModel (same function: {ACT_NAMES[r.get('act', 'gelu')]}, "
            f"{'tied' if r.get('tied') else 'untied'}, learned positions) "
            f"{r['hf_tokens_per_s']:,.0f}: {r['ratio']:.2f}x (target >= 1.2x){_run(r)}{hf}."
        )
    if p := result.get("step_profile"):
        busy = (
            ""
            if p["device_busy_ms"] is None
            else (
                f", of which the device ran kernels {p['device_busy_ms']:.1f} ms ({p['kernels_per_step']:.0f} kernels)"
            )
        )
        top = "; ".join(f"{t['name'][:60]} {t['ms']:.2f} ms" for t in p["top"][:5])
        lines.append(
            f"- Where a {p['model']} step's time goes ({p['precision']}, {'compiled' if p['compiled'] else 'eager'}): "
            f"{p['wall_ms']:.1f} ms a step{busy}; most: {top}{_run(p)}." + (f" {p['note']}." if "note" in p else "")
        )
    for r in result.get("seeds_per_device", []):
        lines.append(
            f"- {r['k']} binding seed(s) as processes on one device: {r['seeds_per_hour']:.2f} seeds/hour, "
            f"{r['vs_one_seed']:.2f}x the time of one seed (target for 6: <= 2x){_run(r)}."
        )
    m = result.get("mamba_kernels")
    if m:
        paths = ", ".join(f"{k} {val}" for k, val in m["kernels"].items())
        lines.append(
            f"- Mamba-2 kernels ({paths}) against HF's torch path, fp32: max |logit difference| "
            f"{m['max_abs_logit_diff']:.2e}, training-loss difference {m['loss_diff']:.2e}{_run(m)}{hf}."
        )
    if pb := result.get("paper_binding"):
        lines.append(paper_binding_line(pb))
    for c in result.get("calls", []):  # a report put together from several runs says which gave what
        lines.append(f"- Run {c['call']} ({c['wall_s']:.0f} s): {', '.join(c['measured'])}; {c['note']}.")
    if note := result.get("model_note"):
        lines.append(f"- The models: {note}.")
    if not result["architectures"]:
        lines += ["", "No architecture row was measured."]
    else:
        lines += [
            "",
            "| model | precision | compiled | batch x seq | tokens/s | TFLOP/s | MFU | peak MiB | estimate MiB |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
    for r in result["architectures"]:
        model = r["model"] + (hf if "Mamba-2" in r["model"] else "")  # HF's Mamba-2 mixer
        lines.append(
            f"| {model} | {r['precision']} | {'yes' if r['compiled'] else 'no'} | {r['batch']} x {r['seq']} | "
            f"{_fmt(r['tokens_per_s'])} | {_fmt(r['tflops'], '.3g')} | {_fmt(r['mfu'], '.1%')} | "
            f"{_fmt(r['peak_mem_mib'])} | {_fmt(r['estimate_mib'])} |"
        )
    lines += [""] + [f"Not measured: {n}." for n in result["not_measured"]] + ["", MARKERS[1]]
    return "\n".join(lines) + "\n"


def finite(value):
    """`value` with every NaN or infinite float replaced by None (nested dicts and lists)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def write_doc(section: str, doc: Path) -> None:
    """Replace the section between the markers, or append it: nothing else in the file changes."""
    text = doc.read_text() if doc.exists() else ""
    head, sep, rest = text.partition(MARKERS[0])
    tail = rest.partition(MARKERS[1])[2] if sep else ""
    body = (head if sep else text.rstrip("\n") + "\n\n") + section.rstrip("\n") + tail
    with atomic_path(doc) as tmp:
        tmp.write_text(body if body.endswith("\n") else body + "\n")


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    if a.worker:
        worker(a.worker, a)
        return
    out = a.out or (None if a.smoke else Path("reports/gpu_check.json"))
    doc = a.doc or (None if a.smoke else Path("docs/bench.md"))

    def save(result: dict) -> None:
        if out is not None:
            with atomic_path(out) as tmp:  # strict JSON: a NaN loss is written as null, not lost with the run
                tmp.write_text(json.dumps(finite(result), indent=2, allow_nan=False) + "\n")

    result = run(a, save)
    if doc is not None:
        write_doc(render(result), doc)
    print(render(result))


if __name__ == "__main__":
    main()
