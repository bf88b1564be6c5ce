"""What a cluster job asks for follows the params profile (src/emergence/core/resources.py).

Expected numbers are worked by hand from the formula in the module docstring."""

from __future__ import annotations

import copy
import re
from types import SimpleNamespace

import pytest
import yaml
from conftest import ROOT
from refusals import refuses

from emergence.core.declared import interpolate
from emergence.core.pipeline import engine_declaration, rules_of
from emergence.core.profile import merge_into
from emergence.core.resources import (
    attn_only_workload,
    declared_values,
    device_need_mb,
    job_resources,
    mem_mb,
    on_device,
    rule_resources,
    workload,
)

DVC = engine_declaration(ROOT)  # the stages as the engines run them, each with its params
DEFAULT = yaml.safe_load((ROOT / "params.yaml").read_text())


def profile(name: str) -> dict:
    """params.yaml under profiles/<name>.yaml, as `python -m emergence.core.profile` merges it."""
    params = copy.deepcopy(DEFAULT)
    if name != "default":
        merge_into(params, yaml.safe_load((ROOT / "profiles" / f"{name}.yaml").read_text()))
    return params


def resources(params: dict, stage: str, **wildcards) -> dict[str, int]:
    """One job's requests: the stage's declared params with its matrix values put in."""
    keys = interpolate(DVC["stages"][stage]["params"], {**params, "item": wildcards}, stage)
    return job_resources(params, keys, stage, wildcards)


def gpu_job(mem_mb: int, runtime: int) -> dict[str, int]:
    """A job's requests as job_resources answers them: `mem_mb` MB of host memory for `runtime` minutes,
    one GPU and one device slot (the same for every job, whatever its device)."""
    return {"mem_mb": mem_mb, "runtime": runtime, "gres": "gpu:1", "device_jobs": 1}


def test_tiny_binding_by_hand():
    """tiny binding_train: L=2, d=32, 2 heads x 16, d_mlp=64, T=32, B=16, 30 steps.
    weights 2 (4*32*32 + 2*32*64) = 16384; activations 4*16*32 * 2 (16*32 + 2*64 + 2*2*32) = 3145728 B;
    host memory (auto: a GPU node) 1024 + 2*16*16384 / 2^20 = 1024.5 -> 1280 MB;
    flops/step 6*16384*512 + 12*2*32*32*512 = 62914560; 2*30*(0.02 + 62914560/4e12) s -> 1 min + 5."""
    w = workload(declared_values(profile("tiny"), ["binding_model", "binding_train"], "t"))
    assert (w.weights, w.activation_bytes, w.flops_per_step) == (16384, 3145728, 62914560)
    assert resources(profile("tiny"), "binding_train", seed=0) == gpu_job(1280, 6)


def on(device: str, params: dict) -> dict:
    params["base"]["device"] = device
    return params


def test_paper_binding_by_hand():
    """paper binding_train: L=12, d=512, 8 heads x 64, d_mlp=2048, T=128, B=64, 105469 steps.
    weights 12 (4*512*512 + 2*512*2048) = 37748736 (the profile says ~37.8M with embeddings);
    activations 4*64*128 * 12 (16*512 + 2*2048 + 2*8*128) = 5637144576 B;
    host memory on cuda 1024 + 2*16*37748736 / 2^20 = 2176 -> 2304 MB;
    on cpu 1024 + 2 (16*37748736 + 5637144576) / 2^20 = 12928 -> 13056 MB (fits a 21 GB node);
    flops/step 6*37748736*8192 + 12*12*128*512*8192 = 1932735283200;
    cuda: 2*105469*(0.02 + 0.4831838) s = 106140.6 s -> 1770 + 5 = 1775 min."""
    paper = profile("paper")
    w = workload(declared_values(paper, ["binding_model", "binding_train"], "t"))
    assert (w.weights, w.activation_bytes, w.flops_per_step) == (37748736, 5637144576, 1932735283200)
    assert resources(paper, "binding_train", seed=0) == gpu_job(2304, 1775)
    assert resources(on("cpu", paper), "binding_train", seed=0)["mem_mb"] == 13056


def test_requests_grow_with_the_profile():
    """The issue: 16 GB for every job and 32 GB for binding_train whatever the profile."""
    for device in ("cuda", "cpu"):
        tiny, default, paper = (on(device, profile(p)) for p in ("tiny", "default", "paper"))
        t, d, p = (resources(params, "binding_train", seed=0) for params in (tiny, default, paper))
        assert t["runtime"] < d["runtime"] < p["runtime"] and p["mem_mb"] < 21000
        assert t["mem_mb"] < d["mem_mb"] < p["mem_mb"] if device == "cpu" else t["mem_mb"] < p["mem_mb"]
        small, big = (resources(paper, "grounding_train", model=m, seed=0) for m in ("transformer4", "transformer18"))
        assert small["mem_mb"] < big["mem_mb"] and small["runtime"] < big["runtime"]


def test_cpu_device_is_timed_at_the_cpu_rate():
    """default binding on cpu: flops/step 6*393216*4096 + 12*8*128*64*4096 = 12884901888;
    2*13000*(0.02 + 12884901888/40e9) s = 8895.2 s -> 149 + 5 = 154 min (measured: ~27 min on 2 cores);
    memory 1024 + 2 (16*393216 + 4*32*128 * 8 (16*64 + 2*256 + 2*4*128)) / 2^20 = 1676 -> 1792 MB."""
    assert resources(on("cpu", profile("default")), "binding_train", seed=0) == gpu_job(1792, 154)


def test_retraining_is_sized_like_the_run_it_repeats():
    params = profile("paper")
    params["grounding_marking"]["model"] = "transformer18"
    assert resources(params, "grounding_marking") == resources(params, "grounding_train", model="transformer18", seed=0)


def test_unsized_stage_gets_the_floor():
    assert resources(profile("paper"), "assoc_basis") == gpu_job(2048, 60)


def test_tiny_association_run_by_hand():
    """tiny assoc_train, 2 layers: V=64, T=12, N=64, full batch B=64, 12 epochs of one step, float32.
    weights 2 (2*64^2 + 12^2) + 64^2 = 20768; state 3*4*20768 = 249216 B;
    activations 4*64*12 (2 (6*64 + 3*12) + 3*64) = 3072*1032 = 3170304 B;
    flops/step 6*64*12 (2 (2*64^2 + 2*12*64) + 64^2) = 4608*23552 = 108527616;
    host memory (auto) 1024 + 2*249216 / 2^20 = 1024.48 -> 1280 MB; 2*12*(0.02 + 108527616/4e12) s -> 1 + 5 min;
    on cpu 1024 + 2 (249216 + 3170304) / 2^20 = 1030.5 -> 1280 MB."""
    w = attn_only_workload({"vocab_size": 64, "seq_len": 12, "max_sequences": 64}, {"epochs": 12}, n_layers=2)
    assert (w.weights, w.state_bytes, w.activation_bytes, w.flops_per_step, w.steps) == (
        20768,
        249216,
        3170304,
        108527616,
        12,
    )
    assert resources(profile("tiny"), "assoc_train", layers=2, seed=0) == gpu_job(1280, 6)


def test_paper_association_run_by_hand():
    """paper assoc_train, 3 layers: V=3000, T=200, N=65536, B=2048 (32 steps an epoch), 100 epochs, float32.
    weights 3 (2*3000^2 + 200^2) + 3000^2 = 63120000; state 12*63120000 = 757440000 B;
    on cuda 1024 + 2*757440000 / 2^20 = 2468.7 -> 2560 MB;
    flops/step 6*2048*200 (3 (2*3000^2 + 2*200*3000) + 3000^2) = 2457600*66600000 = 163676160000000;
    2*3200*(0.02 + 40.91904) s = 262009.9 s -> 4367 + 5 = 4372 min;
    on cpu the (B, T, V) activations, 4*2048*200 (3 (6*3000 + 3*200) + 3*3000) = 106168320000 B, need
    1024 + 2 (757440000 + 106168320000) / 2^20 = 204968.7 -> 205056 MB: no 2-core node holds it."""
    paper = profile("paper")
    w = attn_only_workload(paper["assoc_corpus"], paper["assoc_train"], n_layers=3)
    assert (w.batch, w.steps, w.flops_per_step) == (2048, 3200, 163676160000000)
    assert resources(paper, "assoc_train", layers=3, seed=42) == gpu_job(2560, 4372)
    assert resources(on("cpu", paper), "assoc_train", layers=3, seed=42)["mem_mb"] == 205056


def test_association_workload_edges():
    corpus = {"vocab_size": 8, "seq_len": 4}
    assert attn_only_workload(corpus, {"epochs": 3}, n_layers=1) is None  # max_sequences unset: N unknown
    one = attn_only_workload({**corpus, "max_sequences": 1}, {"epochs": 3}, n_layers=1)
    assert (one.batch, one.steps, one.dtype_bytes) == (1, 3, 4)  # one sequence: full batch, one step an epoch
    # 100 sequences in batches of 64: one whole batch an epoch (the remainder is dropped), in float64
    w = attn_only_workload({**corpus, "max_sequences": 100}, {"epochs": 3, "batch_size": 64, "dtype": "float64"}, 1)
    assert (w.batch, w.steps, w.dtype_bytes) == (64, 3, 8) and isinstance(w.steps, int)


def test_workload_sizes_and_their_defaults():
    base = dict(n_layers=1, d_model=10, n_ctx=4, batch_size=1, steps=1)  # every size at its smallest
    w = workload(base)
    assert (w.n_heads, w.d_mlp, w.d_attn) == (1, 40, 10)  # one head of d_model, a 4x MLP
    w = workload({**base, "n_heads": 3})
    assert w.d_attn == 9 and isinstance(w.d_attn, int)  # 3 heads of 10 // 3
    assert workload({**base, "n_heads": 3, "d_head": 5}).d_attn == 15
    assert workload({**base, "steps": 0}) is None and workload({**base, "n_layers": 0}) is None


def test_declared_values_merge_sections_and_name_scalars_by_their_last_part():
    params = {"top": 3, "a": {"b": {"c": 5}, "model": "m1", "m1": {"d_model": 7}}, "s": {"model": {"d": 1}}}
    assert declared_values(params, ["top", "a.b.c"], "w") == {"top": 3, "c": 5}
    assert declared_values(params, ["a"], "w")["d_model"] == 7  # a declared model name brings its entry in
    assert declared_values(params, ["s"], "w") == {"model": {"d": 1}}  # a model section, not a name
    with refuses("rule r resources", "${a.x}", "params.yaml"):
        declared_values(params, ["a.x"], "rule r resources")


def test_host_memory_at_a_step_boundary_on_a_gpu_and_on_a_cpu():
    """1024 MB + 2 x 128 MiB of state is exactly 1280 MB, a multiple of the 256 MB step: not one step more.
    On a CPU the activations count too."""
    w = SimpleNamespace(state_bytes=128 * 2**20, activation_bytes=64 * 2**20)
    assert mem_mb(w, "cuda") == 1280 and mem_mb(w, "auto") == 1280
    assert mem_mb(w, "cpu") == 1536  # 1024 + 2 (128 + 64) = 1408 -> 1536


def test_device_need_is_the_estimate_without_the_safety_factor():
    """What `python -m emergence check` holds against the device: 128 + 64 MiB on a GPU (its own memory
    holds state and activations), beside the 1024 MB process on a CPU. A byte over a MiB is one MiB more."""
    w = SimpleNamespace(state_bytes=128 * 2**20, activation_bytes=64 * 2**20)
    assert (device_need_mb(w, on_gpu=True), device_need_mb(w, on_gpu=False)) == (192, 1216)
    w = SimpleNamespace(state_bytes=2**20, activation_bytes=1)
    assert (device_need_mb(w, on_gpu=True), device_need_mb(w, on_gpu=False)) == (2, 1026)


def test_missing_sections_are_named_with_the_job():
    params = profile("tiny")
    del params["base"]["device"]
    with refuses("job j", "${base.device}", "params.yaml"):
        job_resources(params, ["binding_train"], "job j")
    params = profile("tiny")
    del params["binding_model"]
    with refuses("job j", "${binding_model}", "params.yaml"):
        job_resources(params, ["base.device", "binding_model", "binding_train"], "job j")
    for section in ("assoc_corpus", "assoc_train"):
        params = profile("tiny")
        del params[section]
        with refuses("job j", f"${{{section}}}", "params.yaml"):
            job_resources(params, ["assoc_train"], "job j", {"layers": "1"})


def test_rule_resources_name_the_rule_in_errors():
    paper = profile("paper")
    rule = next(r for r in rules_of(DVC, paper) if r.name == "grounding_train")
    paper["base"]["device"] = "tpu"
    with refuses("rule grounding_train resources", "base.device", "auto, cpu or cuda", "'tpu'"):
        rule_resources(rule, paper)["mem_mb"]({"model": "transformer4", "seed": 0})


def test_association_run_over_an_unbounded_corpus_gets_the_floor():
    """max_sequences 0 (all): N is only known once the corpus is built."""
    params = profile("paper")
    params["assoc_corpus"]["max_sequences"] = 0
    assert resources(params, "assoc_train", layers=3, seed=42) == gpu_job(2048, 60)


def test_every_training_stage_and_no_report_computes_on_the_device():
    training = [n for n, s in DVC["stages"].items() if re.match(r"python -m stages\.\w+\.train\b", s["cmd"])]
    reports = [n for n, s in DVC["stages"].items() if re.match(r"python -m stages\.(\w+\.)?\w*report\b", s["cmd"])]
    assert len(training) == 4 and len(reports) == 5
    assert all(on_device(DVC["stages"][n]["params"]) for n in training)
    assert not any(on_device(DVC["stages"][n]["params"]) for n in reports)


def test_bad_device_is_one_line():
    params = profile("tiny")
    params["base"]["device"] = "tpu"
    with refuses("binding_train", "base.device", "auto, cpu or cuda", "'tpu'"):
        resources(params, "binding_train", seed=0)


def test_snakefile_rule_resources_follow_wildcards():
    """What the Snakefile gives Snakemake: functions of a job's wildcards."""
    paper = profile("paper")
    rule = next(r for r in rules_of(DVC, paper) if r.name == "grounding_train")
    functions = rule_resources(rule, paper)
    for model in ("transformer4", "transformer18"):
        wildcards = {"model": model, "seed": 0}
        got = {name: f(wildcards) for name, f in functions.items()}
        assert got == resources(paper, "grounding_train", model=model, seed=0)
    assoc = rule_resources(next(r for r in rules_of(DVC, paper) if r.name == "assoc_train"), paper)
    for layers in (1, 3):  # the layer count is a wildcard, not a declared param
        got = {name: f({"layers": str(layers), "seed": "42"}) for name, f in assoc.items()}
        assert got == resources(paper, "assoc_train", layers=layers, seed=42)
    assert assoc["runtime"]({"layers": "1", "seed": "42"}) < assoc["runtime"]({"layers": "3", "seed": "42"})


def test_cluster_profile_holds_no_job_sizes():
    """Partition, account and status command only: sizes in the profile would ignore the params profile."""
    profile = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    assert "set-resources" not in profile
    assert set(profile["default-resources"]) <= {"slurm_partition", "slurm_account"}


# --- `device: auto` (params.yaml's default) on the default profile, where rates do not round away ---


def test_default_profile_on_auto_is_timed_as_a_gpu_node_by_hand():
    """params.yaml as it stands (device: auto: a GPU node on a cluster).
    binding_train: weights 393216, flops/step 12884901888 (above); 2*13000*(0.02 + 12884901888/4e12) s
    = 603.75 s -> 11 + 5 = 16 min (the cpu rate would give 154); memory 1024 + 2*16*393216/2^20 = 1036
    -> 1280 MB (activations stay on the GPU; on cpu 1792).
    grounding_train transformer4: L=4, d=64, attn 64, d_mlp=256, T=64, B=16, 1500 steps; weights
    4 (4*64*64 + 2*64*256) = 196608; flops/step 6*196608*1024 + 12*4*64*64*1024 = 1409286144;
    auto: 2*1500*(0.02 + 0.000352322) = 61.06 s -> 2 + 5 = 7 min; cpu: 2*1500*(0.02 + 0.0352322)
    = 165.7 s -> 3 + 5 = 8 min.
    assoc_train, 3 layers: V=128, T=32, N=B=512 (batch 0: all), 300 epochs of 1 step; flops/step
    6*512*32*(3 (2*128^2 + 2*32*128) + 128^2) = 13690208256; auto: 2*300*(0.02 + 0.00342255) = 14.05 s
    -> 1 + 5 = 6 min; cpu: 2*300*(0.02 + 0.342255) = 217.4 s -> 4 + 5 = 9 min; cpu memory
    1024 + 2 (3*4*117760 + 4*512*32 (3 (6*128 + 3*32) + 3*128)) / 2^20 = 1398.7 -> 1536 MB."""
    default = profile("default")
    assert default["base"]["device"] == "auto"
    assert resources(default, "binding_train", seed=0) == gpu_job(1280, 16)
    assert resources(default, "grounding_train", model="transformer4", seed=0)["runtime"] == 7
    assert resources(on("cpu", profile("default")), "grounding_train", model="transformer4", seed=0)["runtime"] == 8
    assert resources(default, "assoc_train", layers=3, seed=0) == gpu_job(1280, 6)
    assert resources(on("cpu", profile("default")), "assoc_train", layers=3, seed=0) == gpu_job(1536, 9)


@pytest.mark.parametrize("name", ["default", "paper"])
def test_auto_asks_what_cuda_asks_for_every_device_job(name):
    jobs = [("binding_train", dict(seed=0)), ("assoc_train", dict(layers=3, seed=0))]
    jobs += [("grounding_train", dict(model=m, seed=0)) for m in profile(name)["grounding_models"]]
    for stage, wildcards in jobs:
        auto = resources(on("auto", profile(name)), stage, **wildcards)
        assert auto == resources(on("cuda", profile(name)), stage, **wildcards), (stage, wildcards)
        cpu = resources(on("cpu", profile(name)), stage, **wildcards)
        assert cpu["runtime"] > auto["runtime"], stage
