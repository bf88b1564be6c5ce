"""binding_model / binding_train params -> (arch, model config) and (format, eval size, stream, TrainConfig):
defaults, each refusal's key and value (the model section's whole line), and the boundaries the rules name."""

from __future__ import annotations

import pytest
from refusals import assert_refused, refuses, refuses_key

from emergence.studies.binding.train_config import Stream, model_params, train_params

MODEL = {"arch": "lstm", "d_model": 8, "n_ctx": 40}
TRAIN = {"steps": 7, "batch_size": 3, "lr": 0.01}


def refused(call, key: str, value=None, rule: str | None = None) -> None:
    """`call` refuses in one line naming `key` first, and `value` and the `rule` when given."""
    with refuses(key) as e:
        call()
    assert_refused([str(e.value)], key, value, rule)


def test_the_model_section_gets_its_arch_and_the_vocabulary_without_being_changed():
    params = {"binding_model": dict(MODEL)}
    assert model_params(params, 40, 17) == ("lstm", {"d_model": 8, "n_ctx": 40, "d_vocab": 17})
    assert params == {"binding_model": MODEL}  # popped from a copy
    without_arch = {k: v for k, v in MODEL.items() if k != "arch"}
    assert model_params({"binding_model": without_arch}, 3, 5) == ("transformer", {**without_arch, "d_vocab": 5})


def test_the_model_section_refuses_a_vocabulary_and_a_short_context_in_one_line():
    refused(
        lambda: model_params({"binding_model": {**MODEL, "d_vocab": 9}}, 10, 17),
        "binding_model.d_vocab",
        rule="tokenizer",
    )
    refused(
        lambda: model_params({"binding_model": MODEL}, 41, 17),
        "binding_model.n_ctx",
        40,
        "41 positions",
    )
    refused(
        lambda: model_params({"binding_model": {"arch": "lstm"}}, 1, 17),
        "binding_model.n_ctx",
        "None",  # no n_ctx given
        "1 positions",
    )


def test_the_train_section_defaults_and_what_it_hands_the_loop():
    params = {"binding_train": dict(TRAIN)}
    fmt, n_eval, stream, cfg = train_params(params, 11, "cpu")
    assert (fmt, n_eval, stream) == ("answer_only", 500, Stream(False, None, None, None))
    assert (cfg.steps, cfg.batch_size, cfg.lr, cfg.seed, cfg.device) == (7, 3, 0.01, 11, "cpu")
    assert params == {"binding_train": TRAIN}

    given = {
        **TRAIN,
        "format": "line_values",
        "eval_programs": 1,
        "stream": True,
        "stream_hop_weight_power": 20,
        "stream_distractor": "planted",
        "stream_links": "mixed",
    }
    fmt, n_eval, stream, _ = train_params({"binding_train": given}, 0, "auto")
    assert (fmt, n_eval, stream) == ("line_values", 1, Stream(True, 20, "planted", "mixed"))
    for power, distractor, links in ((0, "natural", "any"), (0.5, None, None)):
        changes = {"stream_hop_weight_power": power, "stream_distractor": distractor, "stream_links": links}
        assert train_params({"binding_train": {**given, **changes}}, 0, "auto")[2] == Stream(
            True, power, distractor, links
        )


@pytest.mark.parametrize(
    "change",
    [
        {"format": "scratchpad"},  # refused where the section loads, not first at the first batch
        {"eval_programs": 0},
        {"eval_programs": True},  # a bool is no count
        {"eval_programs": 2.0},
        {"stream": "yes"},
        {"stream": 1},
        {"stream_hop_weight_power": 20.5},
        {"stream_hop_weight_power": -1},
        {"stream_hop_weight_power": False},
        {"stream_hop_weight_power": "2"},
        {"stream_distractor": "any"},
        {"stream_links": "near"},
    ],
    ids=str,
)
def test_a_wrong_train_value_is_refused_naming_its_key_and_value(change):
    ((key, value),) = change.items()
    with refuses_key(f"binding_train.{key}", value):
        train_params({"binding_train": {**TRAIN, **change}}, 0, "cpu")


def test_a_seed_in_the_train_section_is_one_line():
    refused(
        lambda: train_params({"binding_train": {**TRAIN, "seed": 3}}, 0, "cpu"),
        "binding_train.seed",
        rule="base.seeds",
    )
