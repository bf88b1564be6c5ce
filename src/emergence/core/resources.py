"""What a cluster job asks for (memory, wall time, a GPU), computed from the params profile.

A stage runs on a GPU node when it declares `base.device` among its params: that is the param a stage
reads to place its tensors (every training stage, the word-rule ablation's retraining, the basis and the
DINOv2 features); the Snakefile makes every other stage a local rule. The Slurm profile
(profiles/slurm/) names the partition and account; the numbers come from here, so the tiny, default and
paper profiles each ask for what they need.

The estimate reads the model and training sizes from the sections the stage declares (the params
DVC hashes for it): n_layers, d_model, d_mlp, n_heads, d_head, the context (n_ctx or seq_len),
batch_size and steps. Per training step, with P the weights of a GPT-2 block stack
(attention 4 d d_attn + MLP 2 d d_mlp per layer; the Mamba-2 and LSTM blocks here hold no more):

    memory  = BASE_MB + 2 x (16 P [+ 4 B T L (16 d + 2 d_mlp + 2 H T) on cpu]) bytes
              (fp32 weights, grads and two Adam moments, which checkpoints copy to the host; the
              activations kept for the backward pass are host memory only when training on cpu)
    runtime = STARTUP_MIN + 2 x steps x (STEP_S + (6 P B T + 12 L T d_attn B T) / rate) seconds

with B batch, T context, L layers, H heads, rate the device's assumed FLOP/s.

An association run (assoc_train) is shaped by the corpus assoc_corpus built: its attention-only model
carries a one-hot (B, T, V) residual stream through L vocabulary-sized layers (W, V: V x V, P: T x T per
layer; W_O: V x V), with V = assoc_corpus.vocab_size (an upper bound: rarer types may leave it smaller),
T = seq_len, N = max_sequences, B = assoc_train.batch_size (0: all N) and steps = epochs x (N // B):

    P        = L (2 V^2 + T^2) + V^2
    memory   = BASE_MB + 2 x (3 P [+ B T (L (6 V + 3 T) + 3 V)]) x dtype bytes
               (weights, gradients and a checkpoint's copy under plain SGD; per layer the kept
               (B, T, V) products and (B, T, T) scores, plus the logits, on cpu only)
    FLOPs    = 6 B T (L (2 V^2 + 2 T V) + V^2) per step

With max_sequences 0 (all) N is only known once the corpus is built, and the run gets the floor, as do
the stages whose declared params give no model size at all (assoc_basis, dino_features).
docs/slurm.md has the measurements behind the constants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from emergence.core.declared import lookup
from emergence.core.io import PipelineError

DEVICE_PARAM = "base.device"
BASE_MB = 1024  # the Python + torch process with its inputs loaded: tiny binding_train peaks at 430 MB
FLOOR_MB = 2048  # a device stage the formula cannot size
SAFETY = 2  # both estimates are doubled: a job killed at its limit costs more than an idle reservation
STARTUP_MIN = 5  # imports, data loading, evaluation and checkpoint writing outside the steps
STEP_S = 0.02  # per-step overhead (optimizer, logging) that does not scale with the model
# FLOP/s assumed: cpu half the 83 GFLOP/s training reaches on 2 cores here; cuda a fraction of a
# datacenter GPU's fp32 rate, as models this small keep it far from its peak. `auto` on a GPU node is cuda.
RATE = {"cpu": 40e9, "cuda": 4e12}
MEM_STEP_MB = 256  # requests are rounded up to this
DTYPE_BYTES = {"float32": 4, "float64": 8}
# a stage whose model is shaped by a corpus built upstream -> (the corpus's section, the layers wildcard)
CORPUS_SHAPED = {"assoc_train": ("assoc_corpus", "layers")}


class Sized(Protocol):
    """What the memory and time estimates read from a job."""

    steps: int

    @property
    def state_bytes(self) -> int: ...  # weights and optimizer state, held on the host too

    @property
    def activation_bytes(self) -> int: ...  # kept for the backward pass

    @property
    def flops_per_step(self) -> int: ...


@dataclass(frozen=True)
class Workload:
    """The sizes of one training job, read from its declared params."""

    n_layers: int
    d_model: int
    d_mlp: int
    d_attn: int  # n_heads x d_head
    n_heads: int
    context: int
    batch: int
    steps: int

    @property
    def weights(self) -> int:
        return self.n_layers * (4 * self.d_model * self.d_attn + 2 * self.d_model * self.d_mlp)

    @property
    def state_bytes(self) -> int:
        return 16 * self.weights  # fp32 weights, grads and two Adam moments

    @property
    def activation_bytes(self) -> int:
        per_token = self.n_layers * (16 * self.d_model + 2 * self.d_mlp + 2 * self.n_heads * self.context)
        return 4 * self.batch * self.context * per_token

    @property
    def flops_per_step(self) -> int:
        tokens = self.batch * self.context
        return 6 * self.weights * tokens + 12 * self.n_layers * self.context * self.d_attn * tokens


@dataclass(frozen=True)
class AttnOnlyWorkload:
    """One association run: a one-hot (B, T, V) stream through L vocabulary-sized attention layers."""

    n_layers: int
    d_vocab: int
    context: int
    batch: int
    steps: int
    dtype_bytes: int

    @property
    def weights(self) -> int:
        return self.n_layers * (2 * self.d_vocab**2 + self.context**2) + self.d_vocab**2

    @property
    def state_bytes(self) -> int:
        return 3 * self.dtype_bytes * self.weights

    @property
    def activation_bytes(self) -> int:
        L, V, T = self.n_layers, self.d_vocab, self.context
        return self.dtype_bytes * self.batch * T * (L * (6 * V + 3 * T) + 3 * V)

    @property
    def flops_per_step(self) -> int:
        L, V, T = self.n_layers, self.d_vocab, self.context
        return 6 * self.batch * T * (L * (2 * V**2 + 2 * T * V) + V**2)


def attn_only_workload(corpus: dict[str, Any], train: dict[str, Any], n_layers: int) -> AttnOnlyWorkload | None:
    """The run's sizes from its corpus section and its training section; None while N is unknown."""
    n = corpus.get("max_sequences", 0)
    if not (isinstance(n, int) and n > 0):
        return None
    batch = train.get("batch_size", 0) or n
    return AttnOnlyWorkload(
        n_layers=n_layers,
        d_vocab=corpus["vocab_size"],
        context=corpus["seq_len"],
        batch=batch,
        steps=train["epochs"] * max(n // batch, 1),
        dtype_bytes=DTYPE_BYTES[train.get("dtype", "float32")],
    )


def workload(values: dict[str, Any]) -> Workload | None:
    """The workload named by `values` (a stage's declared sections, merged), or None without a model size."""
    context = values.get("n_ctx", values.get("seq_len"))
    needed = (values.get("n_layers"), values.get("d_model"), context, values.get("batch_size"), values.get("steps"))
    if not all(isinstance(v, int) and v > 0 for v in needed):
        return None
    n_layers, d_model, context, batch, steps = needed
    n_heads = values.get("n_heads", 1)
    return Workload(
        n_layers=n_layers,
        d_model=d_model,
        d_mlp=values.get("d_mlp", 4 * d_model),
        d_attn=n_heads * values.get("d_head", d_model // n_heads),
        n_heads=n_heads,
        context=context,
        batch=batch,
        steps=steps,
    )


def mem_mb(w: Sized | None, device: str) -> int:
    """Host memory (Slurm's --mem): on a GPU the activations live in the GPU's own memory."""
    if w is None:
        return FLOOR_MB
    need = BASE_MB + SAFETY * (w.state_bytes + (w.activation_bytes if device == "cpu" else 0)) / 2**20
    return MEM_STEP_MB * math.ceil(need / MEM_STEP_MB)


def device_need_mb(w: Sized, on_gpu: bool) -> int:
    """The estimate itself, without the safety factor: what `python -m emergence check` holds against
    the device. On a GPU its own memory holds weights, gradients, moments and activations; on a CPU
    the process holds them beside BASE_MB."""
    need = (w.state_bytes + w.activation_bytes) / 2**20
    return math.ceil(need if on_gpu else BASE_MB + need)


def step_seconds(w: Sized, device: str) -> float:
    """The estimate of the job's training steps alone, in seconds, without the safety factor."""
    return w.steps * (STEP_S + w.flops_per_step / RATE["cpu" if device == "cpu" else "cuda"])


def runtime_min(w: Sized | None, device: str) -> int:
    if w is None:
        return STARTUP_MIN * 12  # an hour
    return STARTUP_MIN + math.ceil(SAFETY * step_seconds(w, device) / 60)


def declared_values(params: dict, keys: list[str], where: str) -> dict[str, Any]:
    """The stage's declared sections merged in order (later keys win), scalars under their last name.

    A declared `model: <name>` (grounding_marking) also brings in the entry of that name of a declared
    section of models (grounding_models), so the retraining is sized like the run it repeats."""
    merged: dict[str, Any] = {}
    for key in keys:
        value = lookup(params, key, where)
        merged.update(value if isinstance(value, dict) else {key.rsplit(".", 1)[-1]: value})
    named = merged.get(merged.get("model"), None) if isinstance(merged.get("model"), str) else None
    return {**merged, **named} if isinstance(named, dict) else merged


def on_device(declared: list[str]) -> bool:
    """A stage that declares base.device computes on the device: on a cluster, a GPU node."""
    return DEVICE_PARAM in declared


# The resources of one device job. Its GPU is the string gres "gpu:1": a Snakemake group job keeps a
# string resource once where it sums an int (K grouped seeds would ask for K GPUs), though groups are
# not used yet (docs/slurm.md: the Slurm plugin runs a group's jobs one at a time). device_jobs, an
# int, is what a run on one machine limits (--resources device_jobs=K: K device jobs at once on its GPU).
DEVICE_RESOURCES = ("mem_mb", "runtime", "gres", "device_jobs")


def job_resources(params: dict, keys: list[str], where: str, wildcards: dict | None = None) -> dict[str, Any]:
    """mem_mb, runtime (minutes), one GPU and one device slot for one job whose declared params are
    `keys` (resolved); `wildcards` are the job's matrix values (the layer count of a corpus-shaped run)."""
    device = lookup(params, DEVICE_PARAM, where)
    if device not in ("auto", "cpu", "cuda"):
        raise PipelineError(f"{where}: {DEVICE_PARAM} must be auto, cpu or cuda, got {device!r}")
    w = job_workload(params, keys, where, wildcards)
    return {"mem_mb": mem_mb(w, device), "runtime": runtime_min(w, device), "gres": "gpu:1", "device_jobs": 1}


def job_workload(params: dict, keys: list[str], where: str, wildcards: dict | None = None) -> Sized | None:
    """The sizes of one job from its declared params (None: they give no model size)."""
    shaped = next((s for s in CORPUS_SHAPED if s in keys), None)
    if shaped is not None:
        corpus, layers = CORPUS_SHAPED[shaped]
        return attn_only_workload(lookup(params, corpus, where), lookup(params, shaped, where), int(wildcards[layers]))
    return workload(declared_values(params, keys, where))


def rule_resources(rule, params: dict) -> dict[str, Any]:
    """The Snakefile's `resources:` of a device rule, as functions of the job's wildcards."""
    keys, where = list(rule.params.values()), f"rule {rule.name} resources"

    def of(name: str):
        return lambda wildcards: job_resources(params, [k.format(**wildcards) for k in keys], where, wildcards)[name]

    return {name: of(name) for name in DEVICE_RESOURCES}
