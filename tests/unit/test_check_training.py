"""`python -m emergence check` on training: steps and checkpoints bounded, seeds in numpy's range."""

from __future__ import annotations

import copy

import pytest
import yaml
from conftest import ROOT

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
    problems = problems_of(params)
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
    params = edited("base", seeds=[0, TOP_SEED])
    params["assoc_runs"]["seeds"] = [TOP_SEED]
    params["assoc_words"]["seed"] = TOP_SEED
    assert problems_of(params) == []
