"""`python -m emergence export`: a checkpoint as a folder `from_pretrained` loads with no network, each
exportable architecture round-tripped to a max logit difference of 1e-5, TransformerLens 4's hooks
beside ours, its compatibility mode's logits ours up to a constant per position, and every refusal one
line with nothing written."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest
import torch
from refusals import assert_names, refuses
from test_hf_equivalence import TINY, VOCAB, perturbed

from emergence.core.models.registry import build_model
from emergence.core.train.checkpoint import save_checkpoint
from emergence.export import export, main
from emergence.studies.binding.tokenizer import VOCAB as BINDING_VOCAB
from emergence.studies.binding.tokenizer import CharTokenizer

MAMBA = dict(n_layers=4, d_model=32, d_vocab=VOCAB, n_ctx=16, d_state=8, head_dim=16)  # 4: out_proj / 2
ARCHS = {
    "gpt2_learned": ("transformer", {**TINY, "pos": "learned", "act": "gelu_tanh", "tie_embeddings": True}),
    "gpt2_rope": ("transformer", {**TINY, "pos": "rope", "act": "gelu"}),
    "mamba2": ("mamba2", MAMBA),
}


def checkpoint(tmp_path: Path, arch: str, config: dict, d_vocab: int = VOCAB) -> Path:
    model = perturbed(build_model(arch, {**config, "d_vocab": d_vocab}), 11)
    return save_checkpoint(model, tmp_path / "run", 7, {"note": "test"})


def vocab_json(tmp_path: Path, n: int = VOCAB) -> Path:
    words = ["<unk>", *(f"w{i}" for i in range(n - 3)), "book<ENV>", "book<LAN>"]
    path = tmp_path / "vocab.json"
    path.write_text(json.dumps({"targets": ["book"], "vocab": words, "env_marking": "targets"}))
    return path


def logits_after_from_pretrained(out: Path, idx: torch.Tensor) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    with torch.no_grad():
        return AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()(idx).logits


def test_a_run_folder_exports_its_last_step_by_number(tmp_path):
    """Steps 2, 9 and 10 (10 sorts before 9 as text), each with its own weights: step10 is exported."""
    arch, config = ARCHS["gpt2_rope"]
    for seed, step in enumerate((2, 9, 10)):
        model = perturbed(build_model(arch, {**config, "d_vocab": VOCAB}), seed)
        last = save_checkpoint(model, tmp_path / "run", step, {"note": "test"})
    out = tmp_path / "hf"
    export(tmp_path / "run", out, "hf", str(vocab_json(tmp_path)))
    assert json.loads((out / "emergence.json").read_text())["source"] == str(last) and last.name == "step10"
    idx = torch.randint(VOCAB, (2, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert (model(idx)[0] - logits_after_from_pretrained(out, idx)).abs().max() <= 1e-5


@pytest.mark.parametrize(
    "runs, spec",
    [("binding_runs", "binding"), ("binding_aid_runs", "binding"), ("grounding_runs", "g.json"),
     ("visual_runs", "v.json")],
)  # fmt: skip
def test_the_tokenizer_follows_the_runs_folder_the_checkpoint_lies_in(runs, spec, tmp_path, monkeypatch):
    """paths.<study>_runs -> its study's tokenizer: grounding_vocab for grounding, visual_vocab for visual."""
    from emergence.export import tokenizer_for

    monkeypatch.chdir(tmp_path)
    keys = ("binding_runs", "binding_aid_runs", "grounding_runs", "visual_runs")
    paths = {**{key: f"data/{key}" for key in keys}, "grounding_vocab": "g.json", "visual_vocab": "v.json"}
    (tmp_path / "params.yaml").write_text(json.dumps({"paths": paths}))
    assert tokenizer_for(tmp_path / "data" / runs / "seed0" / "step5", None) == spec


@pytest.mark.parametrize("name", list(ARCHS))
def test_the_export_loads_with_from_pretrained_and_computes_our_logits(name, tmp_path):
    arch, config = ARCHS[name]
    step = checkpoint(tmp_path, arch, config)
    out = tmp_path / "hf"
    assert export(step.parent, out, "hf", str(vocab_json(tmp_path))) <= 1e-5  # a run folder: its last step
    from emergence.core.train.checkpoint import load_checkpoint

    ours, _ = load_checkpoint(step)
    idx = torch.randint(VOCAB, (3, 12), generator=torch.Generator().manual_seed(3))  # not the export's own check
    with torch.no_grad():
        assert (ours(idx)[0] - logits_after_from_pretrained(out, idx)).abs().max() <= 1e-5
    config_json = json.loads((out / "config.json").read_text())
    if name == "mamba2":  # HF would divide out_proj by sqrt(4) on load
        assert config_json["rescale_prenorm_residual"] is False
    assert json.loads((out / "emergence.json").read_text())["source"] == str(step)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "run", "vocab.json"]  # no partial folder left


def test_hf_would_rescale_mamba2s_out_proj_without_the_flag(tmp_path):
    """What the flag is for: the same folder, rescale on, loads other logits."""
    step = checkpoint(tmp_path, *ARCHS["mamba2"])
    out = tmp_path / "hf"
    export(step, out, "hf", str(vocab_json(tmp_path)))
    idx = torch.randint(VOCAB, (2, 10), generator=torch.Generator().manual_seed(4))
    right = logits_after_from_pretrained(out, idx)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "rescale_prenorm_residual": True}))
    assert (logits_after_from_pretrained(out, idx) - right).abs().max() > 1e-3


def test_the_binding_tokenizer_gives_our_ids_and_text_back(tmp_path):
    from transformers import AutoTokenizer

    step = checkpoint(tmp_path, *ARCHS["gpt2_learned"], d_vocab=len(BINDING_VOCAB))
    export(step, tmp_path / "hf", "hf", "binding")
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf", local_files_only=True)
    program = "a=1\nb=a\nq=7\n#b:"
    ids = tok(program)["input_ids"]
    assert ids == CharTokenizer().encode(program) and tok.decode(ids) == program
    assert tok.pad_token_id == 0


def test_the_grounding_tokenizer_splits_words_and_maps_unknown_ones(tmp_path):
    from transformers import AutoTokenizer

    vocab = vocab_json(tmp_path)
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    export(step, tmp_path / "hf", "hf", str(vocab))
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf", local_files_only=True)
    words = json.loads(vocab.read_text())["vocab"]
    assert tok("w3 book<ENV> zebra  book<LAN>")["input_ids"] == [
        words.index("w3"),
        words.index("book<ENV>"),
        0,  # <unk>
        words.index("book<LAN>"),
    ]


@pytest.mark.parametrize("name", ["gpt2_learned", "gpt2_rope"])
def test_transformer_lens_loads_the_export_with_our_hook_values(name, tmp_path):
    from emergence.core.train.checkpoint import load_checkpoint
    from emergence.export_lens import hook_differences

    step = checkpoint(tmp_path, *ARCHS[name])
    out = tmp_path / "tl"
    assert export(step, out, "transformer-lens", str(vocab_json(tmp_path))) <= 1e-5
    ours, _ = load_checkpoint(step)
    diffs = hook_differences(ours, out, torch.randint(VOCAB, (2, 9), generator=torch.Generator().manual_seed(5)))
    shared = {"hook_embed", "blocks.0.hook_resid_pre", "blocks.1.hook_resid_post", "blocks.0.attn.hook_q",
              "blocks.1.attn.hook_k", "blocks.0.attn.hook_pattern", "blocks.1.attn.hook_z",
              "blocks.0.ln1.hook_normalized", "ln_final.hook_normalized"}  # fmt: skip
    assert shared <= diffs.keys()
    assert all(d is not None and d <= 1e-5 for d in diffs.values()), diffs


@pytest.mark.parametrize("name", ["gpt2_learned", "gpt2_rope"])
def test_transformer_lens_compatibility_mode_moves_each_positions_logits_by_their_mean(name, tmp_path):
    """enable_compatibility_mode() centres the unembedding: its logits are ours less their mean over the
    vocabulary at each position (raw, 0.14-0.17 apart here), so its log-probs are ours."""
    from emergence.core.train.checkpoint import load_checkpoint
    from emergence.export_lens import bridge_logits, centred

    step = checkpoint(tmp_path, *ARCHS[name])
    out = tmp_path / "tl"
    export(step, out, "transformer-lens", str(vocab_json(tmp_path)))
    ours, _ = load_checkpoint(step)
    idx = torch.randint(VOCAB, (2, 9), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        mine, compatible = ours(idx)[0], bridge_logits(out, compatibility=True)(idx)
    assert (compatible - mine).abs().max() > 1e-2  # the raw logits are not ours
    assert (compatible - centred(mine)).abs().max() <= 1e-5  # ours, less each position's mean
    assert (compatible.log_softmax(-1) - mine.log_softmax(-1)).abs().max() <= 1e-5


def test_a_hook_whose_layout_differs_is_none_and_the_others_still_compared(tmp_path, monkeypatch):
    """Heads before positions on our side: a layout, not a value, so no difference is computed for it."""
    from emergence.core.train.checkpoint import load_checkpoint
    from emergence.export_lens import hook_differences

    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    export(step, tmp_path / "tl", "transformer-lens", str(vocab_json(tmp_path)))
    ours, _ = load_checkpoint(step)
    run_with_cache = ours.run_with_cache

    def heads_first(idx):
        logits, cache = run_with_cache(idx)
        return logits, {**cache, "blocks.0.attn.hook_z": cache["blocks.0.attn.hook_z"].transpose(1, 2)}

    monkeypatch.setattr(ours, "run_with_cache", heads_first)
    diffs = hook_differences(
        ours, tmp_path / "tl", torch.randint(VOCAB, (2, 9), generator=torch.Generator().manual_seed(5))
    )
    assert diffs["blocks.0.attn.hook_z"] is None
    assert diffs["blocks.1.attn.hook_z"] is not None and diffs["blocks.1.attn.hook_z"] <= 1e-5
    assert [name for name, d in diffs.items() if d is None] == ["blocks.0.attn.hook_z"]


@pytest.mark.parametrize("compatibility", [False, True])
def test_the_bridge_stays_on_the_cpu_where_torch_sees_a_gpu(compatibility, tmp_path, monkeypatch):
    """Like the export itself and our checkpoint, whatever accelerator the machine has."""
    from emergence.core.train.checkpoint import load_checkpoint
    from emergence.export_lens import bridge, bridge_logits, centred

    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    export(step, tmp_path / "tl", "transformer-lens", str(vocab_json(tmp_path)))
    ours, _ = load_checkpoint(step)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert {p.device.type for p in bridge(tmp_path / "tl", compatibility).parameters()} == {"cpu"}
    idx = torch.randint(VOCAB, (2, 9), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        theirs, mine = bridge_logits(tmp_path / "tl", compatibility)(idx), ours(idx)[0]
    assert theirs.device.type == "cpu"
    assert (centred(theirs) - centred(mine)).abs().max() <= 1e-5


def test_without_transformer_lens_the_export_names_the_extra_to_install_and_writes_nothing(
    tmp_path, capsys, monkeypatch
):
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    vocab = vocab_json(tmp_path)
    monkeypatch.setitem(sys.modules, "transformer_lens.model_bridge", None)  # the import fails as if absent
    before = files(tmp_path)
    assert main([str(step), "--to", "transformer-lens", str(tmp_path / "tl"), "--tokenizer", str(vocab)]) == 1
    assert_names(one_error_line(capsys), "error: ", "--to transformer-lens", "TransformerLens 4", ".[interp]")
    assert files(tmp_path) == before


def test_the_export_check_holds_compatibility_mode_to_our_logits_up_to_the_constant(tmp_path, monkeypatch):
    """Compared raw (no centring), compatibility mode's logits fail the check: the check covers that bridge."""
    import emergence.export_lens as lens

    monkeypatch.setattr(lens, "centred", lambda logits: logits)
    with refuses("export check", "1e-05"):
        export(
            checkpoint(tmp_path, *ARCHS["gpt2_rope"]), tmp_path / "tl", "transformer-lens", str(vocab_json(tmp_path))
        )
    assert not (tmp_path / "tl").exists()


def damaged(tmp_path: Path) -> Path:
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    (step / "model.safetensors").write_bytes((step / "model.safetensors").read_bytes()[:100])
    return step


def foreign(tmp_path: Path) -> Path:
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    (step / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 32}))  # an HF folder
    return step


@pytest.mark.parametrize(
    "make, named",  # "{source}": the folder given to export
    [
        (lambda p: checkpoint(p, "transformer", {**TINY, "conv_kernel": 4}), ["transformer", "Canon"]),
        (lambda p: checkpoint(p, "lstm", dict(n_layers=1, d_model=16, n_ctx=16)), ["LSTM", "Transformer"]),
        (damaged, ["{source}/model.safetensors: ", "truncated"]),
        (foreign, ["{source}/config.json: ", "'emergence-checkpoint-v1'"]),
        (lambda p: p / "nowhere", ["{source}: ", "config.json, model.safetensors"]),
    ],
)
def test_what_cannot_be_exported_is_one_line_and_nothing_is_written(make, named, tmp_path, capsys):
    source = make(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main([str(source), "--to", "hf", str(tmp_path / "out"), "--tokenizer", str(vocab_json(tmp_path))]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: "), err
    assert_names(err, *(part.format(source=source) for part in named))
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert [p for p in after if p not in before] == [Path("vocab.json")] or after == before


def test_a_tokenizer_of_another_size_is_refused(tmp_path, capsys):
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    assert main([str(step), "--to", "hf", str(tmp_path / "out"), "--tokenizer", "binding"]) == 1
    assert_names(capsys.readouterr().err, "error: --tokenizer binding: ", len(BINDING_VOCAB), f"d_vocab {VOCAB}")
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_outside_the_runs_needs_its_tokenizer_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    assert main([str(step), "--to", "hf", "out"]) == 1
    assert_names(capsys.readouterr().err, f"error: {step}: ", "params.yaml", "--tokenizer")
    (tmp_path / "params.yaml").write_text(f"paths:\n  grounding_runs: run\n  grounding_vocab: {vocab_json(tmp_path)}\n")
    assert main([str(step), "--to", "hf", "out"]) == 0  # under paths.grounding_runs: grounding_vocab's words
    assert (tmp_path / "out/tokenizer.json").is_file()


def files(root: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every folder (None) under `root`: equal before and after means nothing changed."""
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in root.rglob("*")}


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    return err


def test_an_existing_folder_is_replaced_only_when_it_holds_a_previous_export(tmp_path, capsys):
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    out = tmp_path / "out"
    args = [str(step), "--to", "hf", str(out), "--tokenizer", str(vocab_json(tmp_path))]
    assert main(args) == 0
    marker = json.loads((out / ".emergence-export.json").read_text())
    assert marker["source"] == str(step) and marker["to"] == "hf"
    assert sorted(marker["files"]) == sorted(p.name for p in out.iterdir() if p.name != ".emergence-export.json")
    assert main(args) == 1  # without --force even an export stays, and the user learns what --force would do
    assert_names(one_error_line(capsys), f"{out}: ", "--force", "previous export")
    (out / "model.safetensors").write_bytes(b"the earlier export")
    assert main([*args, "--force"]) == 0
    assert (out / "model.safetensors").read_bytes() != b"the earlier export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "run", "vocab.json"]  # nothing kept aside
    (out / "notes.txt").write_text("mine")  # an export the user has added to is no longer only an export
    before = files(tmp_path)
    assert main([*args, "--force"]) == 1
    assert_names(one_error_line(capsys), f"{out}: ", "notes.txt", ".emergence-export.json", "--force")
    assert files(tmp_path) == before


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_a_folder_holding_other_files_is_never_replaced(force, tmp_path, capsys):
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    vocab = vocab_json(tmp_path)
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "mine.txt").write_text("keep")
    (out / "sub/results.parquet").write_bytes(b"\x00\x01")
    before = files(tmp_path)
    assert main([str(step), "--to", "hf", str(out), "--tokenizer", str(vocab), *force]) == 1
    err = one_error_line(capsys)
    assert_names(err, f"{out}: ", "mine.txt", "--force", "previous export")  # and what --force may replace
    assert files(tmp_path) == before


CHECKOUT_FILES = [".git/HEAD", ".dvc/cache/ab/cdef", "data/binding/runs/seed0/step7/config.json",
                  "data/scratch/binding/resume.json", "reports/binding.html", "reports/bench.json",
                  "src/a.py"]  # fmt: skip
PARAMS_PATHS = {"binding_runs": "data/binding/runs", "binding_aids": "data/binding/aids",
                "binding_scratch": "data/scratch/binding", "binding_report": "reports/binding.html"}  # fmt: skip


def checkout_like(co: Path) -> None:
    """A checkout in miniature: git's and DVC's folders, params.yaml's paths, artifacts, reports, code."""
    for name in CHECKOUT_FILES:
        (co / name).parent.mkdir(parents=True, exist_ok=True)
        (co / name).write_text(name)
    (co / "data/binding/aids").mkdir()  # empty: only params.yaml says whose it is
    (co / "params.yaml").write_text("paths:\n" + "".join(f"  {k}: {v}\n" for k, v in PARAMS_PATHS.items()))


@pytest.mark.parametrize(
    "cwd, target",
    [
        ("co", "data"),  # the DVC-tracked artifacts and the scratch
        ("co", "reports"),  # committed reports
        ("co", "data/binding/aids"),  # empty, but params.yaml's paths name it
        ("co", "data/scratch"),  # holds params.yaml's paths.binding_scratch
        ("co", ".git"),
        ("co", ".dvc"),
        ("co", "."),
        ("co", ".."),
        ("co/src", ".."),  # the checkout root, from inside it
        ("co/src", "../data"),  # the checkout's data/, from inside it
        (".", "co"),  # a checkout, from outside it
    ],
)
def test_force_never_replaces_the_checkout_its_folders_or_the_current_folder(
    cwd, target, tmp_path, capsys, monkeypatch
):
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    vocab = vocab_json(tmp_path)
    checkout_like(tmp_path / "co")
    before = files(tmp_path)
    monkeypatch.chdir(tmp_path / cwd)
    assert main([str(step), "--to", "hf", target, "--tokenizer", str(vocab), "--force"]) == 1
    assert one_error_line(capsys).startswith(f"error: {target}: ")
    assert files(tmp_path) == before


STAGES = """stages:
  binding_train:
    matrix:
      seed: ${base.seeds}
    cmd: python -m stages.binding.train --seed ${item.seed}
    outs:
      - ${paths.binding_runs}/seed${item.seed}
"""


@pytest.mark.parametrize(
    "cwd, target, stage",
    [
        ("co", "data/binding/runs/seed0/hf", "binding_train@0"),  # a new folder inside a tracked output
        ("co", "data/binding/runs/seed1", "binding_train@1"),  # the output itself, before its stage ran
        ("co/src", "../data/binding/runs/seed0/deep/hf", "binding_train@0"),  # from inside the checkout
    ],
)
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_an_export_inside_a_stage_output_is_refused_naming_the_stage(
    cwd, target, stage, force, tmp_path, capsys, monkeypatch
):
    """DVC would see the output modified, and the stage's next run would delete the export."""
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    vocab = vocab_json(tmp_path)
    checkout_like(tmp_path / "co")
    (tmp_path / "co/pipeline.yaml").write_text(STAGES)
    with open(tmp_path / "co/params.yaml", "a") as f:
        f.write("base:\n  seeds: [0, 1]\n")
    before = files(tmp_path)
    monkeypatch.chdir(tmp_path / cwd)
    assert main([str(step), "--to", "hf", target, "--tokenizer", str(vocab), *force]) == 1
    assert_names(one_error_line(capsys), f"error: {target}: ", stage)
    assert files(tmp_path) == before
    assert main([str(step), "--to", "hf", "exports", "--tokenizer", str(vocab)]) == 0  # beside the outputs: fine


def test_force_onto_an_empty_folder_writes_the_export(tmp_path):
    args = [str(checkpoint(tmp_path, *ARCHS["gpt2_rope"])), "--to", "hf", "--tokenizer", str(vocab_json(tmp_path))]
    for name, force in (("empty", ["--force"]), ("empty2", [])):  # no one's work: --force or not
        (tmp_path / name).mkdir()
        assert main([*args, str(tmp_path / name), *force]) == 0
        assert (tmp_path / name / "model.safetensors").is_file()
        assert (tmp_path / name / ".emergence-export.json").is_file()


def test_a_read_only_target_is_one_line_naming_it_and_nothing_is_left(tmp_path, capsys, monkeypatch):
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    vocab = vocab_json(tmp_path)
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o500)
    if os.access(parent, os.W_OK):  # root: the mode binds no one, so the file system refuses instead
        mkdir = Path.mkdir

        def read_only(self, *args, **kwargs):
            if self.parent == parent:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
            return mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", read_only)
    before = files(tmp_path)
    try:
        assert main([str(step), "--to", "hf", str(parent / "out"), "--tokenizer", str(vocab)]) == 1
        assert files(tmp_path) == before
    finally:
        parent.chmod(0o700)
    assert_names(one_error_line(capsys), f"error: {parent / 'out'}: ", "write")


def test_a_failed_swap_puts_the_previous_export_back(tmp_path, capsys, monkeypatch):
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    out = tmp_path / "out"
    args = [str(step), "--to", "hf", str(out), "--tokenizer", str(vocab_json(tmp_path))]
    assert main(args) == 0
    before = files(tmp_path)
    rename = Path.rename

    def full(self, target):  # the earlier export moves aside, then the new one cannot take its place
        if ".partial-" in self.name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", full)
    assert main([*args, "--force"]) == 1
    assert "no space left on device" in one_error_line(capsys)
    assert files(tmp_path) == before  # the earlier export whole, nothing partial or aside left
