"""The GPU check's parts, each called directly on small inputs (test_bench_gpu.py runs the whole check once,
in its CPU smoke): bench/pins.py's reading and comparing of the pins, the wheels it carries and their
download (pip faked), and bench/gpu_rows.py's shapes, rates and rows. Whatever a part asks of the machine
(the GPU's name, a clock, a subprocess, installed distributions) is faked, so every number is worked out
by hand; the models are a few hundred weights on the CPU."""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import transformers
import yaml
from conftest import ROOT, help_text, help_words, summary_line
from refusals import refuses

from bench import gpu_rows, pins
from emergence.core.resources import AttnOnlyWorkload, Workload
from emergence.studies.binding.tokenizer import CharTokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

MIB = 2**20


# --- pins.py: names and pins --------------------------------------------------------------------------


def test_a_canonical_name_has_each_run_of_separators_as_one_dash_in_lower_case():
    assert pins.canonical("Typing__Extensions") == "typing-extensions"
    assert pins.canonical("zope.-_Interface") == "zope-interface"
    assert pins.canonical("a.b_c-D") == "a-b-c-d"


def test_pins_are_the_exact_pins_with_the_version_stripped_and_comments_and_ranges_left_out(tmp_path):
    path = tmp_path / "constraints.txt"
    path.write_text(
        "# tqdm==0.1 (a comment, not a pin)\nTQDM== 4.70.1  # 4.70.0 ==broke\nfoo>=1.0\nbar~=2.0\nZope.Interface==8.0\n"
    )
    assert pins.read_pins(path) == {"tqdm": "4.70.1", "zope-interface": "8.0"}


def test_a_pin_with_spaces_around_its_operator_is_read_by_its_name(tmp_path):
    path = tmp_path / "constraints.txt"
    path.write_text("foo == 1.0\n")
    assert pins.read_pins(path) == {"foo": "1.0"}


def test_a_pin_with_an_environment_marker_is_read_as_its_name_and_version(tmp_path):
    path = tmp_path / "constraints.txt"  # pip-compile writes a marker after a platform's own pins
    path.write_text('numpy==2.1.0 ; python_version == "3.12"\nbar==2.0;sys_platform=="linux"\n')
    assert pins.read_pins(path) == {"numpy": "2.1.0", "bar": "2.0"}


def test_the_default_pins_are_the_projects_constraints():
    text = (ROOT / "constraints.txt").read_text()
    got = pins.read_pins()
    for name in ("torch", "transformers", "numpy"):
        assert got[name] == re.search(rf"^{name}==(\S+)", text, re.MULTILINE)[1]
    assert len(got) == len(re.findall(r"^[\w.-]+==", text, re.MULTILINE))


def test_the_loaded_distributions_are_those_owning_an_imported_top_level_module(monkeypatch):
    # fake_top is imported only as a submodule: its top-level name still finds its owners
    owners = {"fake_top": ["Fake_Dist", "other.dist"], "fake_two": ["Second__Dist"], "never_imported": ["Unseen"]}
    monkeypatch.setattr(pins.md, "packages_distributions", lambda: owners)
    monkeypatch.setitem(sys.modules, "fake_top.sub", SimpleNamespace())
    monkeypatch.setitem(sys.modules, "fake_two", SimpleNamespace())
    assert pins.loaded_distributions() == {"fake-dist", "other-dist", "second-dist"}


def test_installed_is_the_distributions_version_or_none_when_it_is_absent(monkeypatch):
    def version(name):
        if name != "present":
            raise pins.md.PackageNotFoundError(name)
        return "1.2.3"

    monkeypatch.setattr(pins.md, "version", version)
    assert pins.installed("present") == "1.2.3"
    assert pins.installed("absent") is None


def test_compare_lists_the_machines_packages_in_name_order_and_a_pin_met_is_no_difference():
    machine = {"zlib-ng": "1.0", "torch": "2.13.0", "attrs": None, "numpy": "2.0"}
    pinned = {"torch": "2.13.0", "attrs": "26.1.0", "numpy": "2.1", "pandas": "3.0"}
    record = pins.compare(machine, pinned)
    assert list(record["packages"]) == ["attrs", "numpy", "torch", "zlib-ng"]  # pandas: pinned, not asked about
    assert record["packages"]["torch"] == {"machine": "2.13.0", "pinned": "2.13.0"}
    assert record["differences"] == [  # torch at its pin: nothing to expect
        {"package": "attrs", "machine": None, "pinned": "26.1.0", "expected": None},
        {"package": "numpy", "machine": "2.0", "pinned": "2.1", "expected": None},
    ]
    unexpected = pins.unpinned(record, ("numpy", "attrs", "pandas", "zlib-ng"))
    assert unexpected == ["attrs absent (pinned 26.1.0)", "numpy 2.0 (pinned 2.1)"]


def test_an_extra_is_its_modules_version_or_why_it_does_not_import(monkeypatch):
    monkeypatch.setitem(sys.modules, "fake_extra", SimpleNamespace(__version__="3.6.0"))
    monkeypatch.setitem(sys.modules, "fake_bare", SimpleNamespace())  # imports, but says no version
    assert pins._importable("fake_extra") == "3.6.0"
    missing, bare = pins._importable("no_such_module_here"), pins._importable("fake_bare")
    assert missing.startswith("not importable") and "ModuleNotFoundError" in missing
    assert bare.startswith("not importable") and "AttributeError" in bare


def test_the_record_compares_the_imported_pins_and_torch_and_lists_the_gpu_extras(monkeypatch):
    monkeypatch.setattr(pins, "read_pins", lambda: {"torch": "2.13.0", "alpha": "1.0", "beta": "2.0"})
    # gamma: imported, not pinned; beta: pinned, not imported; torch: neither listed, always recorded
    monkeypatch.setattr(pins, "loaded_distributions", lambda: {"alpha", "gamma"})
    machine = {"torch": "2.11.0+cu130", "alpha": "1.1", "beta": "2.5", "gamma": "9"}
    monkeypatch.setattr(pins, "installed", machine.get)
    monkeypatch.setattr(pins, "_importable", lambda name: f"{name} here")
    monkeypatch.setattr(pins.platform, "python_version", lambda: "3.12.3")
    assert pins.version_record() == {
        "python": "3.12.3",
        "packages": {
            "alpha": {"machine": "1.1", "pinned": "1.0"},
            "torch": {"machine": "2.11.0+cu130", "pinned": "2.13.0"},
        },
        "differences": [
            {"package": "alpha", "machine": "1.1", "pinned": "1.0", "expected": None},
            {"package": "torch", "machine": "2.11.0+cu130", "pinned": "2.13.0", "expected": pins.TORCH_BUILD},
        ],
        "extras": {name: f"{name} here" for name in ("triton", "mamba_ssm", "causal_conv1d")},
    }


# --- pins.py: the wheels carried ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "wheel, pure",
    [
        ("Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n", True),
        ("Tag: py2-none-any\nTag:py3-none-any\n", True),
        ("Tag: py3-none-any\nTag: cp312-cp312-manylinux_2_17_x86_64\n", False),  # one platform tag is enough
        ("Tag: cp312-abi3-manylinux_2_28_x86_64\n", False),
        ("Wheel-Version: 1.0\nRoot-Is-Purelib: true\n", False),  # no tag: nothing says it installs anywhere
        (None, False),  # no WHEEL file at all (installed from a source tree)
    ],
)
def test_a_distribution_is_pure_python_when_every_tag_of_its_wheel_is_for_any_platform(monkeypatch, wheel, pure):
    class Dist:
        def read_text(self, name):  # any other file reads as a pure wheel's: only WHEEL may decide
            return wheel if name == "WHEEL" else "Tag: py3-none-any\n"

    monkeypatch.setattr(pins.md, "distribution", lambda name: Dist() if name == "some-dist" else None)
    assert pins.pure_python("some-dist") is pure


def test_this_venvs_tqdm_is_pure_python_and_its_numpy_is_not():
    assert pins.pure_python("tqdm") is True and pins.pure_python("numpy") is False


@pytest.mark.parametrize("torch_requires", [["Jinja2>=3.1", "typing_extensions>=4.10", "nvidia-nccl==2; os"], None])
def test_the_carry_is_the_imported_pure_python_pins_less_torchs_own_transformers_first(monkeypatch, torch_requires):
    imported = []
    monkeypatch.setattr(pins.importlib, "import_module", imported.append)
    monkeypatch.setattr(pins.md, "requires", {"torch": torch_requires}.__getitem__)
    loaded = {"zeta", "transformers", "alpha", "jinja2", "typing-extensions", "torch", "numpy", "unpinned"}
    # what the check imports counts only once it is imported: read before, the closure would be empty
    monkeypatch.setattr(pins, "loaded_distributions", lambda: loaded if imported else set())
    monkeypatch.setattr(pins, "pure_python", lambda name: name != "numpy")
    pinned = dict.fromkeys(["zeta", "transformers", "alpha", "jinja2", "typing-extensions", "torch", "numpy"], "1")
    carried = pins.to_carry(pinned)
    assert imported == list(pins.CHECK_MODULES)
    if torch_requires:  # torch's requirements (by canonical name) stay the machine's
        assert carried == ["transformers", "alpha", "zeta"]
    else:
        assert carried == ["transformers", "alpha", "jinja2", "typing-extensions", "zeta"]


def _wheels_written(folder: Path, sizes: dict[str, float], calls: list):
    """subprocess.run as pip download: records the command and writes each wheel (sparse, `sizes` in MiB)."""

    def run(cmd, check):
        calls.append((cmd, check))
        for name, mib in sizes.items():
            with open(folder / name, "wb") as f:
                f.truncate(int(mib * MIB))

    return run


def test_download_fetches_every_pin_and_leaves_out_the_last_wheels_past_56_mib(monkeypatch, tmp_path):
    folder, calls = tmp_path / "not" / "yet", []
    sizes = {  # in priority order: 30 + 20 = 50; + 7 = 57 > 56: left out; + 6 = 56, exactly the limit: carried
        "transformers-5.23.0-py3-none-any.whl": 30,
        "typing_extensions-4.15.0-py3-none-any.whl": 20,
        "zeta-1.0-py3-none-any.whl": 7,
        "ruamel.yaml-0.19.1-py3-none-any.whl": 6,
    }
    monkeypatch.setattr(pins.subprocess, "run", _wheels_written(folder, sizes, calls))
    names = ["transformers", "typing-extensions", "zeta", "ruamel-yaml"]
    pinned = {"transformers": "5.23.0", "typing-extensions": "4.15.0", "zeta": "1.0", "ruamel-yaml": "0.19.1", "x": "9"}
    assert pins.download(names, pinned, folder, "3.11") == ["zeta"]
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    wanted = ["transformers==5.23.0", "typing-extensions==4.15.0", "zeta==1.0", "ruamel-yaml==0.19.1"]
    assert calls == [([*pip, "--python-version", "3.11", "-d", str(folder), *wanted], True)]
    assert sorted(p.name for p in folder.iterdir()) == sorted(set(sizes) - {"zeta-1.0-py3-none-any.whl"})


def test_download_empties_the_folder_of_old_wheels_only(monkeypatch, tmp_path):
    (tmp_path / "old-0.1-py3-none-any.whl").write_text("")
    (tmp_path / "notes.txt").write_text("kept")
    monkeypatch.setattr(pins.subprocess, "run", _wheels_written(tmp_path, {"alpha-1.0-py3-none-any.whl": 1}, []))
    assert pins.download(["alpha"], {"alpha": "1.0"}, tmp_path, "3.12") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alpha-1.0-py3-none-any.whl", "notes.txt"]


def test_main_downloads_the_carry_for_the_python_asked_and_names_what_it_left_out(monkeypatch, tmp_path, capsys):
    pinned = {"alpha": "1", "beta": "2", "gamma": "3"}
    monkeypatch.setattr(pins, "read_pins", lambda: dict(pinned))
    monkeypatch.setattr(pins, "to_carry", lambda p: ["beta", "alpha", "gamma"] if p == pinned else [])
    got = []

    def download(names, p, folder, python):
        got.append((names, p, folder, python))
        for name, mib in (("beta-2-py3-none-any.whl", 3), ("alpha-1-py3-none-any.whl", 0.5)):
            (folder / name).write_bytes(b"\0" * int(mib * MIB))
        return ["gamma"] if python == "3.11" else []

    monkeypatch.setattr(pins, "download", download)
    pins.main(["wheels", str(tmp_path), "--python", "3.11"])
    pins.main(["wheels", str(tmp_path)])
    assert got == [
        (["beta", "alpha", "gamma"], pinned, tmp_path, "3.11"),
        (["beta", "alpha", "gamma"], pinned, tmp_path, "3.12"),
    ]
    first, left, second = capsys.readouterr().out.splitlines()
    # 3 + 0.5 MiB in the folder; two of the three carried, in carry order
    assert re.search(r"\b2 wheels, 3\.5 MiB: beta, alpha$", first)
    assert "gamma" in left and "56" in left
    assert re.search(r"\b3 wheels, 3\.5 MiB: beta, alpha, gamma$", second)


def test_main_asks_for_the_wheels_command_and_its_folder(monkeypatch, capsys):
    monkeypatch.setattr(pins, "read_pins", lambda: pytest.fail("nothing runs without the arguments"))
    for argv in ([], ["wheels"], ["fetch", "x"]):
        with pytest.raises(SystemExit) as e:
            pins.main(argv)
        assert e.value.code == 2
    out = help_text(lambda: pins.main(["wheels", "--help"]), capsys)
    assert "folder" in out and "--python PYTHON" in out


def test_main_says_what_it_is_and_its_command_and_option_do(capsys):
    out = help_text(lambda: pins.main(["--help"]), capsys)
    assert summary_line(pins) in out  # the project's pins on a GPU machine
    assert {"download", "pinned", "pure-Python", "wheels", "imports"} <= help_words(out, "wheels")
    out = help_text(lambda: pins.main(["wheels", "--help"]), capsys)
    assert {"GPU", "machine's", "Python", "image", "3.12"} <= help_words(out, "--python PYTHON")


def test_main_without_a_command_says_a_command_is_required(monkeypatch, capsys):
    monkeypatch.setattr(pins, "read_pins", lambda: pytest.fail("nothing runs without a command"))
    with pytest.raises(SystemExit):
        pins.main([])
    assert re.search(r"required: command$", capsys.readouterr().err.strip())


def test_main_names_every_wheel_it_left_out(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(pins, "read_pins", lambda: {"alpha": "1", "beta": "2", "gamma": "3"})
    monkeypatch.setattr(pins, "to_carry", lambda p: ["alpha", "beta", "gamma"])
    monkeypatch.setattr(pins, "download", lambda names, p, folder, python: ["beta", "gamma"])
    pins.main(["wheels", str(tmp_path)])
    carried, left = capsys.readouterr().out.splitlines()
    assert carried.endswith("1 wheels, 0.0 MiB: alpha")
    assert re.search(r"\b56 MiB\b.*: beta, gamma$", left)


# --- gpu_rows.py: the specs ---------------------------------------------------------------------------

PARAMS = {  # every size distinct, and the grounding models the check does not take as decoys
    "binding_model": {"arch": "transformer", "n_layers": 3, "d_model": 24, "n_heads": 3, "d_head": 6, "d_mlp": 40,
                      "n_ctx": 20, "act": "gelu_tanh"},
    "binding_train": {"batch_size": 5},
    "grounding_train": {"seq_len": 12, "batch_size": 7},
    "grounding_models": {
        "transformer4": {"arch": "transformer", "n_layers": 4, "d_model": 1, "n_heads": 1, "d_head": 1, "d_mlp": 1},
        "transformer12": {"arch": "transformer", "n_layers": 6, "d_model": 16, "n_heads": 2, "d_head": 5, "d_mlp": 48},
        "mamba4": {"arch": "mamba2", "n_layers": 4, "d_model": 1, "d_state": 1, "head_dim": 1, "chunk_size": 1},
        "mamba12": {"arch": "mamba2", "n_layers": 5, "d_model": 20, "d_state": 4, "head_dim": 10, "chunk_size": 4},
        "lstm4": {"arch": "lstm", "n_layers": 2, "d_model": 28},
    },
    "assoc_corpus": {"vocab_size": 50, "seq_len": 9},
    "assoc_order": {"n_layers": 2},
}  # fmt: skip
BINDING_VOCAB = len(CharTokenizer())
NAMES = ["binding GPT-2", "grounding Transformer", "grounding Mamba-2", "grounding LSTM", "association attention-only"]
ARCHS = ["transformer", "transformer", "mamba2", "lstm", "attn_only"]


def test_the_specs_take_each_models_shape_batch_and_context_from_its_own_params():
    params = copy.deepcopy(PARAMS)
    binding, tf, mamba, lstm, attn = gpu_rows.specs(params, smoke=False)
    assert params == PARAMS  # the params are read, never edited (binding_model keeps its arch)
    v = gpu_rows.GROUNDING_VOCAB
    assert [s.name for s in (binding, tf, mamba, lstm, attn)] == NAMES
    assert [s.arch for s in (binding, tf, mamba, lstm, attn)] == ARCHS
    assert (binding.arch, binding.batch, binding.seq) == ("transformer", 5, 20)
    assert binding.config == {"n_layers": 3, "d_model": 24, "n_heads": 3, "d_head": 6, "d_mlp": 40, "n_ctx": 20,
                              "act": "gelu_tanh", "d_vocab": BINDING_VOCAB}  # fmt: skip
    assert binding.estimate == Workload(3, 24, 40, 18, 3, context=20, batch=5, steps=1)
    assert (tf.arch, tf.batch, tf.seq) == ("transformer", 7, 12)
    assert tf.config == {"n_layers": 6, "d_model": 16, "n_heads": 2, "d_head": 5, "d_mlp": 48, "n_ctx": 12,
                         "d_vocab": v}  # fmt: skip
    assert tf.estimate == Workload(6, 16, 48, 10, 2, context=12, batch=7, steps=1)
    assert (mamba.arch, mamba.batch, mamba.seq) == ("mamba2", 7, 12)
    assert mamba.config == {"n_layers": 5, "d_model": 20, "d_state": 4, "head_dim": 10, "chunk_size": 4, "n_ctx": 12,
                            "d_vocab": v}  # fmt: skip
    assert mamba.estimate == Workload(5, 20, 80, 20, 1, context=12, batch=7, steps=1)  # no heads: one, d_mlp 4 d
    assert (lstm.arch, lstm.batch, lstm.seq) == ("lstm", 7, 12)
    assert lstm.config == {"n_layers": 2, "d_model": 28, "n_ctx": 12, "d_vocab": v}
    assert lstm.estimate == Workload(2, 28, 112, 28, 1, context=12, batch=7, steps=1)
    assert (attn.arch, attn.batch, attn.seq) == ("attn_only", 256, 9)
    assert attn.config == {"n_layers": 2, "d_vocab": 50, "n_ctx": 9}
    assert attn.estimate == AttnOnlyWorkload(2, 50, 9, batch=256, steps=1, dtype_bytes=4)


def test_the_smoke_specs_are_the_same_kinds_at_fixed_tiny_shapes_whatever_the_params_sizes():
    binding, tf, mamba, lstm, attn = gpu_rows.specs(copy.deepcopy(PARAMS), smoke=True)
    assert [s.name for s in (binding, tf, mamba, lstm, attn)] == NAMES
    assert [s.arch for s in (binding, tf, mamba, lstm, attn)] == ARCHS
    tiny = {"n_layers": 2, "d_model": 32, "n_heads": 2, "d_head": 16, "d_mlp": 64}
    # the binding model keeps what is not a size (its activation), and the binding vocabulary
    assert binding.config == {**tiny, "n_ctx": 32, "act": "gelu_tanh", "d_vocab": BINDING_VOCAB}
    assert (binding.batch, binding.seq) == (4, 32)
    assert tf.config == {**tiny, "n_ctx": 16, "d_vocab": 64} and (tf.batch, tf.seq) == (2, 16)
    assert mamba.config == {"n_layers": 2, "d_model": 32, "d_state": 16, "head_dim": 16, "chunk_size": 16, "n_ctx": 16,
                            "d_vocab": 64}  # fmt: skip
    assert lstm.config == {"n_layers": 2, "d_model": 32, "n_ctx": 16, "d_vocab": 64}
    assert (lstm.batch, lstm.seq) == (2, 16)
    assert tf.estimate == Workload(2, 32, 64, 32, 2, context=16, batch=2, steps=1)
    # the attention-only model keeps the params' depth
    assert (attn.config, attn.batch) == ({"n_layers": 2, "d_vocab": 64, "n_ctx": 16}, 2)
    assert attn.estimate == AttnOnlyWorkload(2, 64, 16, batch=2, steps=1, dtype_bytes=4)


def test_a_config_without_a_size_has_no_estimate():
    assert gpu_rows._sized({"n_layers": 2, "d_model": 8, "n_ctx": 4}, 3) == Workload(2, 8, 32, 8, 1, 4, 3, 1)
    assert gpu_rows._sized({"d_model": 8, "n_ctx": 4}, 3) is None


def test_paper_params_are_the_defaults_with_the_paper_profile_over_them():
    default = yaml.safe_load((ROOT / "params.yaml").read_text())
    paper = yaml.safe_load((ROOT / "profiles" / "paper.yaml").read_text())
    params = gpu_rows.paper_params()
    assert params["base"]["precision"] == paper["base"]["precision"] != default["base"]["precision"]
    assert "threads" not in paper["base"] and params["base"]["threads"] == default["base"]["threads"]
    assert (
        params["binding_model"]["d_model"] == paper["binding_model"]["d_model"] != default["binding_model"]["d_model"]
    )


TINY_TF = {"n_layers": 1, "d_model": 8, "n_heads": 2, "d_head": 4, "d_mlp": 12, "n_ctx": 6, "d_vocab": 11}
TINY_MAMBA = {"n_layers": 1, "d_model": 8, "d_state": 4, "head_dim": 4, "chunk_size": 4, "n_ctx": 6, "d_vocab": 11}


def test_a_spec_builds_the_same_weights_whatever_the_random_state():
    spec = gpu_rows.Spec("tiny", "transformer", dict(TINY_TF), 2, 5, None)
    torch.manual_seed(1)
    one = spec.build("cpu")
    torch.manual_seed(2)
    two = spec.build("cpu")
    assert type(one).__name__ == "Transformer" and one.config.d_mlp == 12
    assert all(torch.equal(a, b) for a, b in zip(one.state_dict().values(), two.state_dict().values()))
    assert spec.config == TINY_TF


# --- gpu_rows.py: the device, its peak and the clock -------------------------------------------------


def test_sync_waits_for_a_gpu_and_never_for_the_cpu(monkeypatch):
    waits = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: waits.append(a))
    gpu_rows.sync("cpu")
    assert waits == []
    gpu_rows.sync("cuda:1")
    assert len(waits) == 1


@pytest.mark.parametrize(  # the data sheets give bf16 with sparsity: twice the dense peak
    "name, sparse_tflops",
    [("NVIDIA H100 80GB HBM3", 1978.9), ("NVIDIA H100 PCIe", 1513), ("NVIDIA H100 NVL", 1671), ("NVIDIA H200", 1978.9)],
)
def test_a_known_gpus_peak_is_its_data_sheets_in_flop_per_second(monkeypatch, name, sparse_tflops):
    monkeypatch.setattr(torch.cuda, "get_device_name", {"cuda:1": name}.__getitem__)
    monkeypatch.setattr(torch, "randn", lambda *a, **k: pytest.fail("a data-sheet peak is not measured"))
    peak, source = gpu_rows.peak_flops("cuda:1")
    assert peak == pytest.approx(sparse_tflops / 2 * 1e12, rel=1e-4)
    assert name.removeprefix("NVIDIA ") in source


def test_an_h200_nvls_peak_is_its_own_data_sheets(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H200 NVL")
    assert gpu_rows.peak_flops("cuda")[0] == pytest.approx(1671 / 2 * 1e12, rel=1e-4)


def test_no_gpu_has_no_peak(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: pytest.fail("no GPU to ask"))
    assert gpu_rows.peak_flops("cpu")[0] is None


class StepClock:
    """The check's `time`: perf_counter's time moves only when a fake step or matmul says so."""

    def __init__(self, wall: float = 0.0):
        self.now, self.wall, self.slept = 0.0, wall, []

    def perf_counter(self) -> float:
        return self.now

    def time(self) -> float:
        return self.wall

    def sleep(self, s: float) -> None:
        self.slept.append(s)


def test_an_unknown_gpus_peak_is_ten_timed_bf16_matmuls_after_one_warm_up(monkeypatch):
    clock, made, syncs = StepClock(), [], []
    monkeypatch.setattr(gpu_rows, "time", clock)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "Some Future GPU")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: syncs.append(clock.now))

    class Matrix:
        products = 0

        def __matmul__(self, other):
            Matrix.products += 1
            clock.now += 0.5  # each product takes half a second
            return self

    def randn(*size, device, dtype):
        made.append((size, device, dtype))
        return Matrix()

    monkeypatch.setattr(torch, "randn", randn)
    peak, _ = gpu_rows.peak_flops("cuda:0")
    assert made == [((8192, 8192), "cuda:0", torch.bfloat16)] and Matrix.products == 11
    assert peak == pytest.approx(2 * 8192**3 * 10 / 5.0)  # 10 products of 2 n^3 in 5 s: the warm-up not counted
    assert syncs == [0.5, 5.5]  # after the warm-up, after the timed ten


def scripted(clock: StepClock, name: str, durations: list[float], log: list):
    """A fake training step: logs its name and the tokens it got, advances the clock by its next duration."""
    it = iter(durations)

    def step(idx):
        log.append((name, idx))
        clock.now += next(it)

    return step


def test_a_rate_is_the_tokens_over_the_median_step_time_after_three_warm_ups(monkeypatch):
    clock, log = StepClock(), []
    monkeypatch.setattr(gpu_rows, "time", clock)
    idx = torch.zeros(2, 5, dtype=torch.long)  # 10 tokens a step
    # each round's 2 timed steps per model, after 3 warm-ups of 100 s that must not count:
    # one: 6, 2, 20 s -> 3, 1, 10 s a step -> median 3 (the mean would be 4.67)
    # two: 2, 10, 14 s -> 1, 5, 7 s a step -> median 5 (the mean would be 4.33)
    steps = {
        "one": scripted(clock, "one", [100] * 3 + [2, 4, 1, 1, 10, 10], log),
        "two": scripted(clock, "two", [100] * 3 + [1, 1, 5, 5, 6, 8], log),
    }
    rates = gpu_rows.timed_rates(steps, idx, argparse.Namespace(steps=2, rounds=3), "cpu")
    assert rates == {"one": pytest.approx(10 / 3), "two": pytest.approx(10 / 5)}
    assert [name for name, _ in log] == ["one"] * 3 + ["two"] * 3 + (["one"] * 2 + ["two"] * 2) * 3  # rounds alternate
    assert all(got is idx for _, got in log)


def test_timed_rates_wait_for_the_gpu_after_the_warm_ups_and_each_timed_run(monkeypatch):
    clock, log, syncs = StepClock(), [], []
    monkeypatch.setattr(gpu_rows, "time", clock)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: syncs.append(len(log)))
    steps = {"a": scripted(clock, "a", [1] * 5, log), "b": scripted(clock, "b", [1] * 5, log)}
    gpu_rows.timed_rates(steps, torch.zeros(1, 3, dtype=torch.long), argparse.Namespace(steps=1, rounds=2), "cuda")
    assert syncs == [6, 7, 8, 9, 10]  # steps done at each wait: 3 + 3 warm-ups, then one after each timed step


# --- gpu_rows.py: the profile's ops -------------------------------------------------------------------


def _event(key, device, us, annotation=False):
    from torch.autograd import DeviceType

    on_gpu = device == DeviceType.CUDA
    return SimpleNamespace(
        key=key,
        device_type=device,
        self_device_time_total=us if on_gpu else 0,
        self_cpu_time_total=0 if on_gpu else us,
        is_user_annotation=annotation,
    )


def test_the_costliest_ops_come_first_from_any_order():
    from torch.autograd import DeviceType

    cpu, gpu = DeviceType.CPU, DeviceType.CUDA
    events = [
        _event("mm", cpu, 1.0),
        _event("gemm", gpu, 0.5),
        _event("range", cpu, 4.0, annotation=True),  # on a CPU a range's own time counts
        _event("softmax", gpu, 3.0),
        _event("add", cpu, 5.0),
        _event("AdamW.step", gpu, 10.0, annotation=True),
        _event("copy", gpu, 2.0),
        _event("view", cpu, 0.0),
        _event("idle", gpu, 0.0),  # no time of its own: no op
        _event("mul", cpu, 3.0),
    ]
    ops, attr = gpu_rows.costliest(events, cuda=False)
    assert [e.key for e in ops] == ["add", "range", "mul", "mm"] and attr == "self_cpu_time_total"
    ops, attr = gpu_rows.costliest(events, cuda=True)
    assert [e.key for e in ops] == ["softmax", "copy", "gemm"] and attr == "self_device_time_total"


# --- gpu_rows.py: the rows ----------------------------------------------------------------------------


def fake_trainer(made: list):
    """gpu_rows.trainer recorded: each step says how it was made in its forward path."""

    def trainer(model, precision, compiled, device, hf=False, mode="default"):
        made.append((model, precision, compiled, device, hf))

        def step(idx):
            step.forward_path = f"ran {precision} {compiled}"

        return step

    return trainer


@pytest.mark.parametrize(
    "config, precision, compiled, peak",
    [(TINY_TF, "bf16", False, 2e12), (TINY_MAMBA, "fp32", True, None)],
)
def test_an_architecture_row_turns_the_rate_and_the_counted_flops_into_tflops_and_mfu(
    monkeypatch, config, precision, compiled, peak
):
    arch = "mamba2" if "d_state" in config else "transformer"
    estimate = SimpleNamespace(state_bytes=3 * MIB, activation_bytes=MIB // 2)
    spec = gpu_rows.Spec("tiny", arch, config, 2, 5, estimate)
    made, timed, counted = [], [], []
    monkeypatch.setattr(gpu_rows, "trainer", fake_trainer(made))
    real_flops = gpu_rows.step_flops

    def step_flops(loss_fn, idx):
        counted.append((real_flops(loss_fn, idx), idx))
        return counted[-1][0]

    def timed_rates(steps, idx, a, device):
        timed.append((idx, a, device))
        for step in steps.values():
            step(idx)
        return {name: 500.0 for name in steps}  # 500 tokens/s: 50 steps of 10 tokens

    monkeypatch.setattr(gpu_rows, "step_flops", step_flops)
    monkeypatch.setattr(gpu_rows, "timed_rates", timed_rates)
    a = argparse.Namespace(steps=1, rounds=1)
    row = gpu_rows.arch_row(spec, precision, compiled, a, "cpu", peak)
    ((model, *how),) = made
    assert how == [precision, compiled, "cpu", False] and model.training
    ((flops, idx),) = counted
    assert flops > 0 and idx.shape == (2, 5) and int(idx.max()) < 11
    assert timed == [(idx, a, "cpu")]  # the same batch timed as counted
    assert row["tflops"] == pytest.approx(flops * 50 / 1e12)
    assert row["mfu"] == (pytest.approx(flops * 50 / peak) if peak else None)
    assert (row["model"], row["batch"], row["seq"]) == ("tiny", 2, 5)
    assert (row["precision"], row["compiled"]) == (precision, compiled)
    assert row["tokens_per_s"] == 500.0 and row["estimate_mib"] == 3.5 and row["peak_mem_mib"] is None
    assert row["forward"] == f"ran {precision} {compiled}"
    kernels = {"mamba2.scan": "torch", "mamba2.chunk_scan": "torch", "mamba2.conv1d": "torch"}
    assert row["kernels"] == (kernels if arch == "mamba2" else None)  # only Mamba-2 has kernels to name


def test_an_architecture_row_without_an_estimate_has_none(monkeypatch):
    def timed_rates(steps, idx, a, device):
        for step in steps.values():
            step(idx)
        return {name: 1.0 for name in steps}

    monkeypatch.setattr(gpu_rows, "trainer", fake_trainer([]))
    monkeypatch.setattr(gpu_rows, "timed_rates", timed_rates)
    row = gpu_rows.arch_row(gpu_rows.Spec("t", "transformer", TINY_TF, 1, 4, None), "fp32", False, None, "cpu", None)
    assert row["estimate_mib"] is None and row["mfu"] is None


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_step_profile_is_wall_ms_a_step_and_each_ops_time_over_the_profiled_steps(monkeypatch, device):
    from torch.profiler import ProfilerActivity

    cuda = device == "cuda"
    attr = "self_device_time_total" if cuda else "self_cpu_time_total"
    ops = [  # in us over the 3 profiled steps, costliest first, as costliest() gives them; 12 launches
        SimpleNamespace(key="k" * 130, count=6, **{attr: 900}),
        SimpleNamespace(key="second", count=3, **{attr: 600}),
        SimpleNamespace(key="third", count=3, **{attr: 300}),
    ]
    made, seen, calls, profiled = [], [], [], []

    def trainer(model, precision, compiled, device, hf=False, mode="default"):
        made.append((precision, compiled, device))
        return lambda idx: calls.append(idx.shape)

    def costliest(events, cuda):
        seen.append(cuda)
        return ops, attr

    monkeypatch.setattr(gpu_rows, "trainer", trainer)
    monkeypatch.setattr(gpu_rows, "timed_rates", lambda steps, idx, a, device: {"x": 400.0})  # 10 tokens: 40 steps/s
    monkeypatch.setattr(gpu_rows, "costliest", costliest)
    if cuda:  # a GPU's profile: the device faked around the step

        @contextmanager
        def profile(activities):
            profiled.extend(activities)
            yield SimpleNamespace(key_averages=lambda: [])

        monkeypatch.setattr(torch.profiler, "profile", profile)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
        monkeypatch.setattr(torch, "randint", lambda high, size, device: torch.zeros(size, dtype=torch.long))
    spec = SimpleNamespace(name="tiny", config={"d_vocab": 11}, batch=2, seq=5, build=lambda d: torch.nn.Linear(1, 1))
    p = gpu_rows.step_profile(spec, "bf16", True, argparse.Namespace(steps=3, rounds=1), device, top=2)
    assert made == [("bf16", True, device)] and calls == [(2, 5)] * 3  # the profile runs --steps steps
    assert seen == [cuda]
    assert p["wall_ms"] == pytest.approx(25.0)  # 1000 ms / 40 steps
    assert p["top"] == [{"name": "k" * 120, "ms": pytest.approx(0.3)}, {"name": "second", "ms": pytest.approx(0.2)}]
    assert (p["model"], p["precision"], p["compiled"]) == ("tiny", "bf16", True)
    if cuda:
        assert profiled == [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        assert p["device_busy_ms"] == pytest.approx(0.6)  # 1800 us over 3 steps
        assert p["kernels_per_step"] == pytest.approx(4.0)  # 12 launches over 3 steps
    else:
        assert p["device_busy_ms"] is None and p["kernels_per_step"] is None


# --- gpu_rows.py: the Mamba-2 torch path --------------------------------------------------------------


def _entry_points():
    from transformers.models.mamba2 import modeling_mamba2

    return modeling_mamba2, list(gpu_rows.KERNEL_ENTRY_POINTS.values())


def test_the_torch_path_refuses_a_kernel_that_wraps_no_torch_function(monkeypatch):
    module, names = _entry_points()

    def plain(*a):  # no __wrapped__: a release that wraps its kernels otherwise
        return None

    monkeypatch.setattr(module, names[2], plain)
    before = {n: getattr(module, n) for n in names}
    paths = ["torch", "torch", "fused"]
    monkeypatch.setattr(
        gpu_rows, "kernel_paths", lambda: {f"mamba2.{k}": p for k, p in zip(gpu_rows.KERNEL_ENTRY_POINTS, paths)}
    )
    with refuses(names[2], transformers.__version__, error=RuntimeError), gpu_rows.torch_path():
        pass
    assert {n: getattr(module, n) for n in names} == before


def test_the_torch_path_keeps_a_function_already_hfs_torch_one(monkeypatch):
    module, names = _entry_points()

    def plain(*a):
        return None

    monkeypatch.setattr(module, names[0], plain)
    before = {n: getattr(module, n) for n in names}
    monkeypatch.setattr(
        gpu_rows, "kernel_paths", lambda: {f"mamba2.{k}": "torch" for k in gpu_rows.KERNEL_ENTRY_POINTS}
    )
    with gpu_rows.torch_path():
        inside = {n: getattr(module, n) for n in names}
    assert inside[names[0]] is plain
    assert all(inside[n] is before[n].__wrapped__ for n in names[1:])
    assert {n: getattr(module, n) for n in names} == before


def test_a_torch_path_row_is_the_bf16_eager_row_measured_inside_the_torch_path(monkeypatch):
    module, names = _entry_points()
    torch_fns, got = [getattr(module, n).__wrapped__ for n in names], []

    def arch_row(spec, precision, compiled, a, device, peak):
        on_torch = [getattr(module, n) for n in names] == torch_fns
        got.append((spec, precision, compiled, a, device, peak, on_torch))
        return {"model": spec.name, "tokens_per_s": 7.0}

    monkeypatch.setattr(gpu_rows, "arch_row", arch_row)
    spec, a = SimpleNamespace(name="grounding Mamba-2"), argparse.Namespace()
    row = gpu_rows.torch_path_row(spec, a, "cuda:2", 5e14)
    assert got == [(spec, "bf16", False, a, "cuda:2", 5e14, True)]
    assert row == {"model": "grounding Mamba-2 (torch path)", "tokens_per_s": 7.0}


def test_the_mamba_check_compares_eval_logits_and_training_loss_of_both_paths(monkeypatch):
    state = {"torch": False}
    calls = []

    @contextmanager
    def torch_path():
        state["torch"] = True
        yield
        state["torch"] = False

    class Model:
        training = True

        def eval(self):
            self.training = False
            return self

        def train(self):
            self.training = True
            return self

        def kernels(self):
            return {"mamba2.scan": "torch" if state["torch"] else "fused"}

        def __call__(self, idx, targets=None):
            calls.append((self.training, idx, targets, torch.is_grad_enabled()))
            logits = torch.zeros(*idx.shape, 7, dtype=torch.bfloat16)
            if self.training:  # training-mode logits are not the ones compared
                return logits + 100, torch.tensor(1.5 if state["torch"] else 1.0)
            if state["torch"]:
                logits[0, 1, 2], logits[1, 3, 4] = 0.25, -0.75
            return logits, None

    monkeypatch.setattr(gpu_rows, "torch_path", torch_path)
    spec = SimpleNamespace(name="m", config={"d_vocab": 11}, seq=5, build=lambda device: Model())
    got = gpu_rows.mamba_check(spec, "cpu")
    assert got == {"model": "m", "kernels": {"mamba2.scan": "fused"}, "max_abs_logit_diff": 0.75, "loss_diff": 0.5}
    assert [c[0] for c in calls] == [False, True, False, True]  # eval logits, then the training loss, each path
    idx, targets = calls[1][1], calls[1][2]
    assert idx.shape == (2, 5) and int(idx.max()) < 11 and not any(c[3] for c in calls)
    assert torch.equal(targets[:, :-1], idx[:, 1:]) and (targets[:, -1] == -1).all()


@pytest.mark.parametrize(
    "extra, act, tied",
    [({"act": "gelu_tanh", "tie_embeddings": True}, "gelu_tanh", True), ({}, "gelu", False)],
)
def test_hf_rows_time_ours_against_hf_gpt2_at_the_specs_shape_in_each_mode(monkeypatch, extra, act, tied):
    config = {**TINY_TF, "pos": "rope", "dropout": 0.1, "conv_kernel": 3, **extra}  # what HF's GPT-2 cannot compute
    built, made, timed = [], [], []
    real_build = gpu_rows.build_model
    monkeypatch.setattr(gpu_rows, "build_model", lambda arch, c, name: built.append(c) or real_build(arch, c, name))
    monkeypatch.setattr(gpu_rows, "trainer", fake_trainer(made))
    rates = iter([{"ours": 300.0, "hf": 200.0}, {"ours": 90.0, "hf": 120.0}])

    def timed_rates(steps, idx, a, device):
        timed.append((list(steps), idx.shape, int(idx.max()) < 11, device))
        return next(rates)

    monkeypatch.setattr(gpu_rows, "timed_rates", timed_rates)
    spec = gpu_rows.Spec("b", "transformer", config, 3, 6, None)
    rows = gpu_rows.hf_gpt2_rows(spec, argparse.Namespace(), "cpu", (False, True))
    assert built == [{**config, "pos": "learned", "dropout": 0.0, "conv_kernel": 0}] * 2
    assert [(type(m).__name__, m.training, *how) for m, *how in made] == [
        (kind, True, "bf16", compiled, "cpu", hf)
        for compiled in (False, True)
        for kind, hf in (("Transformer", False), ("GPT2LMHeadModel", True))
    ]
    assert timed == [(["ours", "hf"], (3, 6), True, "cpu")] * 2
    function = {"act": act, "tied": tied}  # the spec's, where HF's GPT-2 computes the same
    assert rows == [
        {"compiled": False, "ours_tokens_per_s": 300.0, "hf_tokens_per_s": 200.0, "ratio": 1.5, **function},
        {"compiled": True, "ours_tokens_per_s": 90.0, "hf_tokens_per_s": 120.0, "ratio": 0.75, **function},
    ]
    assert spec.config == config


# --- gpu_rows.py: the training step -------------------------------------------------------------------


class OneWeight(torch.nn.Module):
    """A 1-D weight (AdamW decays none) whose loss has gradient (1, -2, 3): every sign known."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([0.5, -0.5, 2.0]))
        self.calls = []

    def forward(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        loss = (self.w * torch.tensor([1.0, -2.0, 3.0])).sum()
        return SimpleNamespace(loss=loss) if kwargs else (None, loss)


@pytest.mark.parametrize("hf", [False, True])
def test_a_training_step_is_one_adamw_step_at_lr_1e_4_on_the_shifted_labels(monkeypatch, hf):
    forwards = []

    class Forward:  # the training loop's forward recorded: how the step was asked to run
        def __init__(self, model, cfg, device, where):
            self.model, self.cfg, self.device, self.path = model, cfg, device, f"fake {cfg.compile_mode}"
            forwards.append(self)

        def __call__(self, *args, **kwargs):
            return self.model(*args, **kwargs)

    monkeypatch.setattr(gpu_rows, "StepForward", Forward)
    model, idx = OneWeight(), torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    precision, compiled, mode = ("fp32", False, "default") if hf else ("bf16", True, "reduce-overhead")
    step = gpu_rows.trainer(model, precision, compiled, "cpu", hf=hf, **({} if hf else {"mode": mode}))
    step(idx)
    ((args, kwargs),) = model.calls
    if hf:  # HF's model shifts its labels itself
        assert args == () and kwargs["input_ids"] is idx and kwargs["labels"] is idx
    else:
        assert args[0] is idx and kwargs == {}
        assert args[1].tolist() == [[1, 4, 1, 5, -1], [2, 6, 5, 3, -1]]
    (forward,) = forwards
    assert (forward.cfg.precision, forward.cfg.compile, forward.cfg.compile_mode) == (precision, compiled, mode)
    assert forward.device == "cpu" and step.forward_path == f"fake {mode}"
    # Adam's first step moves each weight by lr against its gradient's sign
    assert model.w.detach().tolist() == pytest.approx([0.5 - 1e-4, -0.5 + 1e-4, 2.0 - 1e-4], abs=1e-6)


# --- gpu_rows.py: the binding run, the seeds on one device and their worker ---------------------------


def _binding_params(**train) -> dict:
    params = gpu_rows.paper_params()
    params["binding_model"].update(n_layers=1, d_model=8, n_heads=2, d_head=4, d_mlp=12)  # n_ctx: the paper's
    params["binding_train"].update(train)
    return params


@pytest.fixture
def binding_fakes(monkeypatch):
    """binding_run's training steps scripted (durations on the fake clock, losses) and its held-out
    predictions right but for the first 8: what each step got, and the tables drawn, are recorded."""
    from torch._dynamo.utils import counters

    from emergence.core.train import loop
    from emergence.studies.binding import batches, sets

    clock = StepClock()
    monkeypatch.setattr(gpu_rows, "time", clock)
    fakes = SimpleNamespace(clock=clock, durations=[], losses=[], steps=[], tables={}, skips=0)
    real_table = sets.generate_table

    def generate_table(rng, cfg, n, *, set_name):
        fakes.tables[set_name] = (n, real_table(rng, cfg, min(n, 40), set_name=set_name))
        return fakes.tables[set_name][1]

    def train_step(model, forward, optimizer, batch_fn, cfg, step, device):
        fakes.steps.append((step, cfg.precision, cfg.batch_size, cfg.compile, forward.path, model.training))
        clock.now += fakes.durations[step]
        counters["inductor"]["cudagraph_skips"] += fakes.skips
        return {"loss": fakes.losses[step]}, 0

    def predict_answers(model, data, tok):
        assert not model.training
        answers = fakes.tables["gpu-check-eval"][1]["answer"].to_numpy().copy()
        answers[:8] = -1  # not a digit: wrong
        return answers

    monkeypatch.setattr(sets, "generate_table", generate_table)
    monkeypatch.setattr(loop, "_train_step", train_step)
    monkeypatch.setattr(batches, "predict_answers", predict_answers)
    monkeypatch.setitem(counters["inductor"], "cudagraph_skips", 5)  # an earlier run's, not this one's
    return fakes


def test_a_binding_run_predicts_a_seed_from_the_median_step_after_ten_and_stops_on_time(binding_fakes):
    f = binding_fakes
    # ten warm-up steps of 4 s, then 0.125, 0.5, 0.25 s: 40.625 s after 12 steps, < 40.7: a 13th runs
    f.durations = [4.0] * 10 + [0.125, 0.5, 0.25]
    f.losses = [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.5, 0.25, 0.125, 0.0625]
    r = gpu_rows.binding_run(_binding_params(), argparse.Namespace(binding_s=40.7), "cpu", True, "reduce-overhead")
    assert [s[0] for s in f.steps] == list(range(13)) and r["steps"] == 13
    # the paper profile's precision, the smoke's batch of 4 and no compile, whatever the mode asked
    assert set(s[1:] for s in f.steps) == {("bf16", 4, False, "eager", True)}
    assert (r["precision"], r["batch"]) == ("bf16", 4)
    assert (r["compiled"], r["compile_mode"], r["forward"]) == (False, None, "eager")
    assert r["step_s"] == 0.25  # the median of the last three (their mean: 0.29)
    assert r["predicted_seed_min"] == pytest.approx(0.25 * 105_469 / 60)
    assert r["first_loss"] == 9.0
    assert r["last_loss"] == pytest.approx((6 + 5 + 4 + 3 + 2 + 1 + 0.5 + 0.25 + 0.125 + 0.0625) / 10)
    assert (f.tables["gpu-check"][0], f.tables["gpu-check-eval"][0]) == (64, 32)
    assert r["held_out_accuracy"] == pytest.approx((32 - 8) / 32)  # of the 32 held out (here 32 < 40 drawn)
    assert r["cudagraph_skips"] == 0


def test_a_paper_scale_binding_run_compiles_in_its_mode_and_stops_at_its_steps(monkeypatch, binding_fakes):
    f, compiled = binding_fakes, []
    monkeypatch.setattr(torch, "compile", lambda model, mode: compiled.append(mode) or model)  # seconds to import
    f.durations, f.losses, f.skips = [0.5, 0.125, 0.25, 1.0], [3.0, 2.0, 1.5, 1.25], 2
    params = _binding_params(steps=4, warmup_steps=0, n_log_checkpoints=0, batch_size=3)
    a = argparse.Namespace(binding_s=1e9)
    r = gpu_rows.binding_run(params, a, "cpu", False, "max-autotune-no-cudagraphs")
    assert compiled == ["max-autotune-no-cudagraphs"]
    assert r["steps"] == 4 and [s[0] for s in f.steps] == [0, 1, 2, 3]  # the schedule's end, long before the time
    assert {s[1:5] for s in f.steps} == {("bf16", 3, True, "compiled (max-autotune-no-cudagraphs)")}
    assert (r["compiled"], r["compile_mode"], r["batch"]) == (True, "max-autotune-no-cudagraphs", 3)
    assert r["step_s"] == pytest.approx(0.375)  # fewer than ten steps: the median of them all
    assert r["last_loss"] == pytest.approx((3.0 + 2.0 + 1.5 + 1.25) / 4)
    assert (f.tables["gpu-check"][0], f.tables["gpu-check-eval"][0]) == (16_384, 1024)  # drawn here: 40
    assert r["held_out_accuracy"] == pytest.approx((40 - 8) / 40)
    assert r["cudagraph_skips"] == 4 * 2  # this run's: the counter stood at 5 before it


class Worker:
    """A seeds worker's process, finished: its stdout (any noise, then the JSON line)."""

    def __init__(self, out: str):
        self.out = out

    def communicate(self):
        return self.out, None


def test_k_seeds_on_one_device_are_timed_together_and_the_slowest_ends_the_batch(monkeypatch):
    monkeypatch.setattr(gpu_rows, "time", StepClock(wall=1000.0))
    outs = iter(
        [
            '{"steps_per_s": 4.0, "late": false}\n',
            'compiling\n{"steps_per_s": 3.0, "late": true}\n',
            '{"steps_per_s": 2.0, "late": false}\n',
            '{"steps_per_s": 2.5, "late": true}\n',
        ]
    )
    started = []

    def popen(cmd, stdout, text):
        started.append((cmd, stdout, text))
        return Worker(next(outs))

    monkeypatch.setattr(gpu_rows.subprocess, "Popen", popen)
    rows = gpu_rows.seeds_on_one_device(argparse.Namespace(smoke=False), "cuda:1", (1, 3))
    # every worker warms up for 30 s from now, then all run the same 10 s
    cmd = [sys.executable, "-m", "bench.gpu", "--worker", "1030.0:10.0", "--device", "cuda:1"]
    assert started == [(cmd, gpu_rows.subprocess.PIPE, True)] * 4
    one, three = 105_469 / 4.0 / 60, 105_469 / 2.0 / 60  # a seed's minutes at the slowest worker's rate
    assert rows == [
        {"k": 1, "steps_per_s": [4.0], "late_workers": 0, "seeds_per_hour": pytest.approx(60 / one),
         "minutes_for_k_seeds": pytest.approx(one), "vs_one_seed": 1.0},
        {"k": 3, "steps_per_s": [3.0, 2.0, 2.5], "late_workers": 2, "seeds_per_hour": pytest.approx(3 * 60 / three),
         "minutes_for_k_seeds": pytest.approx(three), "vs_one_seed": pytest.approx(2.0)},
    ]  # fmt: skip


def test_k_seeds_are_compared_with_one_seed_alone_whatever_k_are_asked(monkeypatch):
    monkeypatch.setattr(gpu_rows, "time", StepClock(wall=1000.0))
    rates = iter([4.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0])  # K=1 first, then the two and the four asked for
    monkeypatch.setattr(
        gpu_rows.subprocess, "Popen", lambda cmd, **k: Worker(f'{{"steps_per_s": {next(rates)}, "late": false}}')
    )
    rows = gpu_rows.seeds_on_one_device(argparse.Namespace(smoke=False), "cuda", (4, 2))
    assert [(r["k"], r["vs_one_seed"]) for r in rows] == [(1, 1.0), (2, 2.0), (4, 4.0)]


def test_smoke_seeds_warm_up_for_less_and_pass_the_smoke_on(monkeypatch):
    monkeypatch.setattr(gpu_rows, "time", StepClock(wall=1000.0))
    started = []
    monkeypatch.setattr(
        gpu_rows.subprocess, "Popen", lambda cmd, **k: started.append(cmd) or Worker('{"steps_per_s": 1, "late": 0}')
    )
    gpu_rows.seeds_on_one_device(argparse.Namespace(smoke=True), "cpu", (1, 2))
    cmd = [sys.executable, "-m", "bench.gpu", "--worker", "1005.0:3.0", "--device", "cpu", "--smoke"]
    assert started == [cmd] * 3


@pytest.mark.parametrize("smoke, wall, late", [(True, 100.0, False), (False, 110.0, True)])
def test_a_worker_waits_for_the_common_start_and_counts_its_steps_in_the_window(monkeypatch, capsys, smoke, wall, late):
    clock, made, calls = StepClock(wall=wall), [], []
    monkeypatch.setattr(gpu_rows, "time", clock)
    params = _binding_params(batch_size=3)
    params["binding_model"]["n_ctx"] = 16
    monkeypatch.setattr(gpu_rows, "paper_params", lambda: params)

    def trainer(model, precision, compiled, device, hf=False, mode="default"):
        made.append((precision, compiled, device))

        def step(idx):
            calls.append(idx.shape)
            clock.now += 0.375

        return step

    monkeypatch.setattr(gpu_rows, "trainer", trainer)
    gpu_rows.worker("103.5:1.0", argparse.Namespace(smoke=smoke, device="cpu"))
    # the paper profile's precision; compiled unless a smoke
    assert made == [("bf16", not smoke, "cpu")]
    # a window of 1 s at 0.375 s a step: 3 steps, the last ending at 1.125 s
    assert len(calls) == 3 + 3 and set(calls) == {(4, 32) if smoke else (3, 16)}
    assert clock.slept == [0.0 if late else 3.5]
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out == {"steps_per_s": pytest.approx(3 / 1.125), "late": late}
