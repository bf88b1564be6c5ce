"""`python -m emergence check` on training: steps and checkpoints bounded, seeds in numpy's range."""

from __future__ import annotations

import copy

import pytest
import yaml
from conftest import ROOT
from refusals import assert_not_refused, assert_refused

from emergence.check import problems_of

SHIPPED = yaml.safe_load((ROOT / "params.yaml").read_text())
TOP_SEED = 2**32 - 1  # np.random.seed refuses anything above


def edited(section: str, **changes) -> dict:
    params = copy.deepcopy(SHIPPED)
    params[section].update(changes)
    return params


def test_a_huge_step_count_is_one_line_with_the_checkpoints_and_the_limits():
    # the multiples of 500 up to 10^12, plus step 0 and the 30 log-spaced steps that are no multiple of 500
    ratio = (10**12) ** (1 / 29)
    odd = {round(ratio**i) for i in range(30)} | {0}
    expected = 10**12 // 500 + len({s for s in odd if s == 0 or s % 500})
    assert problems_of(edited("binding_train", steps=10**12)) == [
        f"binding_train.steps: 1000000000000 steps would save {expected} checkpoints; the limits are 1000000 "
        "steps and 10000 checkpoints per run (lower it, or save fewer checkpoints)"
    ]


@pytest.mark.parametrize(
    "steps, every, refused",
    [(1_000_000, 0, False), (1_000_001, 0, True), (9_999, 1, False), (10_000, 1, True)],
    ids=["steps at the limit", "one step over", "checkpoints at the limit", "one checkpoint over"],
)
def test_the_limits_are_inclusive(steps, every, refused):
    params = edited("grounding_train", steps=steps, checkpoint_every=every, n_log_checkpoints=0, warmup_steps=0)
    problems = [p for p in problems_of(params) if p.startswith("grounding_train.")]  # (not the lens's, on 2 saved)
    assert len(problems) == refused and all(p.startswith(f"grounding_train.steps: {steps} steps ") for p in problems)


def test_association_epochs_count_the_batches_of_an_epoch():
    # 512 sequences in batches of 8: 64 steps an epoch, so 20,000 epochs are 1,280,000 steps
    params = edited("assoc_train", epochs=20_000, batch_size=8, checkpoint_every_epochs=0, n_log_checkpoints=0)
    params["assoc_train"]["dense_until"] = 0
    assert problems_of(params) == [
        "assoc_train.epochs: 20000 epochs of up to 64 steps would save 2 checkpoints; the limits are 1000000 "
        "steps and 10000 checkpoints per run (lower it, or save fewer checkpoints)"
    ]
    params["assoc_train"]["batch_size"] = 0  # full batch: one step an epoch
    assert problems_of(params) == []


@pytest.mark.parametrize("epochs, refused", [(83_333, False), (83_334, True)])
def test_an_epoch_is_the_whole_batches_of_a_corpus_that_batches_do_not_divide(epochs, refused):
    # 100 sequences in batches of 8: 12 whole batches an epoch (the last 4 sequences make no step), so
    # 83,333 epochs are 999,996 steps and 83,334 are 1,000,008 (assoc_train.epochs against MAX_STEPS)
    params = edited("assoc_train", epochs=epochs, batch_size=8, checkpoint_every_epochs=0, n_log_checkpoints=0)
    params["assoc_train"]["dense_until"] = 0
    params["assoc_corpus"]["max_sequences"] = 100
    problems = problems_of(params)
    if refused:
        assert_refused(problems, "assoc_train.epochs", value="12 steps", rule="1000000 steps")
    else:
        assert_not_refused(problems, "assoc_train.epochs")


def test_checkpoints_every_tenth_of_an_epoch_are_counted():
    # 64 steps an epoch; a checkpoint every 0.125 epochs is every 8 steps: 1,000 epochs save 8,000 (+ step 0)
    params = edited("assoc_train", epochs=1_000, batch_size=8, checkpoint_every_epochs=0.125, n_log_checkpoints=0)
    params["assoc_train"]["dense_until"] = 0
    assert problems_of(params) == []
    params["assoc_train"]["epochs"] = 1_300  # 83,200 steps: 10,400 checkpoints and step 0's
    assert problems_of(params) == [
        "assoc_train.epochs: 1300 epochs of up to 64 steps would save 10401 checkpoints; the limits are 1000000 "
        "steps and 10000 checkpoints per run (lower it, or save fewer checkpoints)"
    ]


@pytest.mark.parametrize(
    "section, key, value, expected",
    [
        ("base", "seeds", [0, TOP_SEED + 1], f"base.seeds: seeds are at most {TOP_SEED} (2**32 - 1, numpy's range), "),
        (
            "binding_data",
            "seed",
            2**64,
            f"binding_data.seed: seeds are at most {TOP_SEED} (2**32 - 1, numpy's range), ",
        ),
        ("assoc_runs", "seeds", [0, TOP_SEED + 1], f"assoc_runs.seeds: seeds are at most {TOP_SEED} "),
    ],
)
def test_seeds_beyond_numpys_range_are_one_line_naming_the_key(section, key, value, expected):
    problems = problems_of(edited(section, **{key: value}))
    assert len(problems) == 1 and problems[0].startswith(expected) and problems[0].endswith(f"got {value}")


def test_the_largest_seed_passes():
    params = edited("base", seeds=[0, TOP_SEED])  # 0: binding_aids.seeds
    params["assoc_runs"]["seeds"] = [TOP_SEED]
    params["assoc_words"]["seed"] = TOP_SEED
    assert problems_of(params) == []


def _paper() -> dict:
    from emergence.core.profile import merge_into, profile_path

    params = copy.deepcopy(SHIPPED)
    merge_into(params, yaml.safe_load(profile_path("paper").read_text()))
    return params


# The paper's binding model, worked by hand from resources.py's formula: P = 12 (4 d^2 + 2 d d_mlp) with
# d 512, d_mlp 2048; state 16 P bytes; activations 4 B T L (16 d + 2 d_mlp + 2 H T), B 64, T 128, H 8.
P = 12 * (4 * 512 * 512 + 2 * 512 * 2048)
BINDING_MIB = (16 * P + 4 * 64 * 128 * 12 * (16 * 512 + 2 * 2048 + 2 * 8 * 128)) // 2**20  # 5,952 exactly


@pytest.mark.parametrize("limit, refused", [(BINDING_MIB, False), (BINDING_MIB - 1, True)])
def test_a_job_larger_than_the_gpu_is_refused_naming_it_and_its_estimate(limit, refused):
    from emergence.machine import jobs_fit_the_device

    assert BINDING_MIB == 5952
    params = _paper()
    params["base"]["seeds"] = [0, 1]
    seen = []
    got = jobs_fit_the_device(params, ROOT, lambda device: seen.append(device) or (limit, "a test GPU", True))
    binding = [line for line in got if line.startswith("binding_train@")]
    expected = [
        f"binding_train@{s}: resources.py estimates 5,952 MiB (weights, gradients, optimizer moments and "
        f"activations), more than the {limit:,} MiB of a test GPU; lower its batch_size or context"
        for s in (0, 1)
    ]
    assert binding == (expected if refused else []) and seen == ["cuda"]
    assert any(line.startswith("assoc_train@3-42: ") for line in got)  # |V| 3000 at batch 2048: ~100 GB
    assert not any(line.startswith(("binding_data", "assoc_corpus", "binding_report")) for line in got)  # host-only


def test_on_a_cpu_the_process_base_counts_and_no_visible_gpu_checks_nothing():
    from emergence.machine import jobs_fit_the_device

    params = _paper()
    cpu = jobs_fit_the_device(params, ROOT, lambda device: (BINDING_MIB + 1023, "this machine's memory", False))
    assert any(line.startswith("binding_train@0: resources.py estimates 6,976 MiB") for line in cpu)  # + 1,024 base
    roomy = jobs_fit_the_device(params, ROOT, lambda device: (BINDING_MIB + 1024, "this machine's memory", False))
    assert not any(line.startswith("binding_train@") for line in roomy)
    assert jobs_fit_the_device(params, ROOT, lambda device: None) == []  # cuda named, none visible: cannot tell


def test_the_device_holds_its_memory_in_mib_of_2_to_the_20_bytes(monkeypatch):
    import os
    from types import SimpleNamespace

    from emergence import machine
    from emergence.machine import device_memory

    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 3 * 2**18 + 100}  # 3 GiB and 400 KiB: 3,072 MiB, 3,221 MB
    monkeypatch.setattr(os, "sysconf", pages.__getitem__)
    monkeypatch.setattr(machine, "visible_gpu", lambda: None)
    assert device_memory("cpu") == (3072, "this machine's memory", False) and device_memory("cuda") is None
    gpu = SimpleNamespace(total_memory=80 * 2**30 + 2**19, name="Test GPU")  # 80 GiB and half a MiB
    monkeypatch.setattr(machine, "visible_gpu", lambda: SimpleNamespace(get_device_properties=lambda index: gpu))
    assert device_memory("auto") == (81920, "the Test GPU", True)


def test_a_cpu_build_of_torch_sees_no_gpu_and_another_build_asks_torch(monkeypatch):
    import torch

    from emergence import machine

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # what a build would say: not asked below
    monkeypatch.setattr(machine, "version", lambda package: "2.13.0+cpu")
    assert machine.visible_gpu() is None
    monkeypatch.setattr(machine, "version", lambda package: "2.13.0+cu128")
    assert machine.visible_gpu() is torch.cuda
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert machine.visible_gpu() is None


def test_training_hours_are_the_device_jobs_seconds_over_3600(monkeypatch):
    from emergence import machine

    monkeypatch.setattr(machine, "step_seconds", lambda w, device: 1800.0)  # half an hour a sized job
    sized = [job for job, need in machine.device_job_estimates(SHIPPED, ROOT).items() if need is not None]
    assert len(sized) > 1 and machine.training_hours(SHIPPED, ROOT, "cpu") == len(sized) / 2


def test_the_shipped_default_fits_this_machine():
    assert problems_of(copy.deepcopy(SHIPPED), root=ROOT) == []


def test_device_job_estimates_name_every_device_job_with_none_where_no_model_size_is_declared():
    from emergence.machine import device_job_estimates

    params = _paper()
    gpu, cpu = (device_job_estimates(params, ROOT, on_gpu=g) for g in (True, False))
    assert [gpu[f"binding_train@{s}"] for s in range(6)] == [BINDING_MIB] * 6
    assert cpu["binding_train@0"] == BINDING_MIB + 1024  # the process itself, on the host
    assert gpu["assoc_basis"] is None and gpu["dino_features"] is None  # device jobs the formula cannot size
    assert not {"binding_data", "assoc_corpus", "assoc_order", "binding_report"} & gpu.keys()  # host-only jobs
    assert gpu["binding_aid_train@with_aids-0"] == BINDING_MIB  # the same model (the conv's 2,048 weights aside)
    assert {job.split("@")[0] for job, need in gpu.items() if need is not None} == {
        "binding_train", "binding_aid_train", "assoc_train", "grounding_train", "grounding_marking", "visual_train",
    }  # fmt: skip
