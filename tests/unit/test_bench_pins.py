"""The pins on a GPU machine: each package's version beside constraints.txt, every difference named
(torch's CUDA build as expected), and the page marking the rows measured through an unpinned package."""

from __future__ import annotations

from bench import gpu, pins


def test_pins_are_read_by_canonical_name(tmp_path):
    path = tmp_path / "constraints.txt"
    path.write_text("# a comment\ntorch==2.13.0\nruamel.yaml==0.19.1  # why\nPyYAML==6.0.4\nnot-pinned>=1\n\n")
    assert pins.read_pins(path) == {"torch": "2.13.0", "ruamel-yaml": "0.19.1", "pyyaml": "6.0.4"}
    assert pins.canonical("Ruamel_YAML") == pins.canonical("ruamel.yaml") == "ruamel-yaml"


def test_every_difference_is_named_and_torch_is_expected():
    machine = {"torch": "2.11.0+cu130", "transformers": "5.17.0", "numpy": "2.4.6", "tqdm": None, "triton": "3.6.0"}
    record = pins.compare(machine, {"torch": "2.13.0", "transformers": "5.23.0", "numpy": "2.4.6", "tqdm": "4.70.1"})
    assert record["packages"]["numpy"] == {"machine": "2.4.6", "pinned": "2.4.6"}
    assert record["packages"]["triton"] == {"machine": "3.6.0", "pinned": None}  # unpinned: recorded, not compared
    assert record["differences"] == [
        {"package": "torch", "machine": "2.11.0+cu130", "pinned": "2.13.0", "expected": pins.TORCH_BUILD},
        {"package": "tqdm", "machine": None, "pinned": "4.70.1", "expected": None},  # absent is a difference
        {"package": "transformers", "machine": "5.17.0", "pinned": "5.23.0", "expected": None},
    ]
    assert pins.unpinned(record, ("transformers", "torch", "numpy")) == ["transformers 5.17.0 (pinned 5.23.0)"]
    assert pins.unpinned(record, ("tqdm",)) == ["tqdm absent (pinned 4.70.1)"]


def test_this_machines_record_holds_the_imported_pins():
    record = pins.version_record()
    assert {"torch", "numpy", "pandas", "transformers"} <= set(record["packages"])
    assert record["packages"]["transformers"] == {"machine": "5.23.0", "pinned": "5.23.0"}
    assert [d["package"] for d in record["differences"]] == ["torch"]  # this venv is the pinned one: + cpu only
    assert set(record["extras"]) == {"triton", "mamba_ssm", "causal_conv1d"}


def _result(transformers: str) -> dict:
    machine = {"torch": "2.11.0+cu130", "transformers": transformers}
    hf = {"compiled": False, "ours_tokens_per_s": 2.0, "hf_tokens_per_s": 1.0, "ratio": 2.0}
    row = dict(precision="bf16", compiled=False, batch=1, seq=2, tokens_per_s=1.0, tflops=None, mfu=None)
    return {
        "device": "a GPU",
        "smoke": False,
        "versions": {
            "python": "3.12.3",
            **pins.compare(machine, {"torch": "2.13.0", "transformers": "5.23.0"}),
            "extras": {"triton": "3.6.0"},
        },
        "peak_bf16_tflops": None,
        "peak_from": "no GPU",
        "hf_gpt2": [hf],
        "mamba_kernels": {"kernels": {"mamba2.scan": "fused"}, "max_abs_logit_diff": 0.0, "loss_diff": 0.0},
        "architectures": [
            {**row, "model": "binding GPT-2", "peak_mem_mib": None, "estimate_mib": None},
            {**row, "model": "grounding Mamba-2", "peak_mem_mib": None, "estimate_mib": None},
        ],
        "not_measured": [],
    }


def test_the_page_marks_the_rows_measured_through_an_unpinned_transformers():
    page = gpu.render(_result("5.17.0"))
    mark = "[unpinned: transformers 5.17.0 (pinned 5.23.0)]"
    assert "transformers 5.17.0 (pinned 5.23.0)" in page.split("\n")[4]  # the versions line names it
    assert "torch 2.11.0+cu130 (pinned 2.13.0; expected: the machine's CUDA build" in page
    marked = [line for line in page.splitlines() if mark in line]
    assert [line[:19] for line in marked] == ["- Paper-shape GPT-2", "- Mamba-2 kernels (", "| grounding Mamba-2"]
    assert mark not in gpu.render(_result("5.23.0"))  # at its pin: no row is marked
