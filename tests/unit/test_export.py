"""`python -m emergence export`: a checkpoint as a folder `from_pretrained` loads with no network, each
exportable architecture round-tripped to a max logit difference of 1e-5, TransformerLens 4's hooks
beside ours, and every refusal one line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_hf_equivalence import TINY, VOCAB, perturbed

from emergence.core.models import build_model
from emergence.core.train import save_checkpoint
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


@pytest.mark.parametrize("name", list(ARCHS))
def test_the_export_loads_with_from_pretrained_and_computes_our_logits(name, tmp_path):
    arch, config = ARCHS[name]
    step = checkpoint(tmp_path, arch, config)
    out = tmp_path / "hf"
    assert export(step.parent, out, "hf", str(vocab_json(tmp_path))) <= 1e-5  # a run folder: its last step
    from emergence.core.train import load_checkpoint

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
    from emergence.core.train import load_checkpoint
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


def damaged(tmp_path: Path) -> Path:
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    (step / "model.safetensors").write_bytes((step / "model.safetensors").read_bytes()[:100])
    return step


def foreign(tmp_path: Path) -> Path:
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    (step / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 32}))  # an HF folder
    return step


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: checkpoint(p, "transformer", {**TINY, "conv_kernel": 4}), "causal-conv (Canon) layer"),
        (lambda p: checkpoint(p, "lstm", dict(n_layers=1, d_model=16, n_ctx=16)), "no Hugging Face model computes"),
        (damaged, "unreadable or truncated safetensors file"),
        (foreign, "foreign checkpoint"),
        (lambda p: p / "nowhere", "neither a checkpoint folder"),
    ],
)
def test_what_cannot_be_exported_is_one_line_and_nothing_is_written(make, says, tmp_path, capsys):
    source = make(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main([str(source), "--to", "hf", str(tmp_path / "out"), "--tokenizer", str(vocab_json(tmp_path))]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and says in err and len(err.splitlines()) == 1, err
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert [p for p in after if p not in before] == [Path("vocab.json")] or after == before


def test_a_tokenizer_of_another_size_is_refused(tmp_path, capsys):
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    assert main([str(step), "--to", "hf", str(tmp_path / "out"), "--tokenizer", "binding"]) == 1
    assert f"--tokenizer binding: {len(BINDING_VOCAB)} tokens, the model has d_vocab {VOCAB}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_outside_the_runs_needs_its_tokenizer_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    assert main([str(step), "--to", "hf", "out"]) == 1
    assert "name its --tokenizer" in capsys.readouterr().err
    (tmp_path / "params.yaml").write_text(f"paths:\n  grounding_runs: run\n  grounding_vocab: {vocab_json(tmp_path)}\n")
    assert main([str(step), "--to", "hf", "out"]) == 0  # under paths.grounding_runs: grounding_vocab's words
    assert (tmp_path / "out/tokenizer.json").is_file()


def test_an_existing_folder_is_replaced_only_with_force(tmp_path, capsys):
    step = checkpoint(tmp_path, *ARCHS["gpt2_rope"])
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    args = [str(step), "--to", "hf", str(out), "--tokenizer", str(vocab_json(tmp_path))]
    assert main(args) == 1
    assert "exists and is not empty (--force replaces it)" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    assert main([*args, "--force"]) == 0
    assert not (out / "mine.txt").exists() and (out / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "run", "vocab.json"]
    (tmp_path / "empty").mkdir()  # an empty folder is no one's work: written into without --force
    assert main([str(step), "--to", "hf", str(tmp_path / "empty"), "--tokenizer", str(vocab_json(tmp_path))]) == 0
