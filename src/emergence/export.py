"""`python -m emergence export CHECKPOINT --to hf OUT_DIR`: a checkpoint as a folder the Hugging Face tools load.

    python -m emergence export data/binding/aid_runs/plain/seed1 --to hf exports/binding-plain
    python -c "from transformers import AutoModelForCausalLM as M; M.from_pretrained('exports/binding-plain')"

CHECKPOINT is a `step{N}` folder or a run folder (its last step). The folder holds the HF config and
safetensors weights (core/models/hf.py: GPT-2 with learned positions -> GPT2LMHeadModel, with RoPE ->
GPTNeoXForCausalLM, Mamba-2 -> Mamba2ForCausalLM, each with the activation that computes ours) and a
tokenizer of the study's vocabulary, so `AutoTokenizer.from_pretrained(OUT_DIR)` works too. Before the
folder appears, the export is loaded back with `from_pretrained` and its logits compared with ours on
random sequences (max difference <= 1e-5); nothing is written when that, or anything before, fails.
`--to transformer-lens` also loads the export into TransformerLens 4's TransformerBridge (the optional
extra `.[interp]`) and compares its logits alike, and those of the bridge in compatibility mode, which
centres the unembedding, after centring ours (export_lens.py).

OUT gets a marker, `.emergence-export.json` (the source, the target, the files written). An existing OUT
is replaced only when it is empty or (--force) holds a previous export and nothing else, and never when
it is the current folder or a parent of it, a checkout, data/, reports/, .git, .dvc, or a folder that
params.yaml's paths name or hold; nor is OUT ever a stage's declared output or inside one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import SafetensorError
from transformers.utils import logging as hf_logging

from emergence.core.config import PARAMS_FILE, read_params, section
from emergence.core.declared import DECLARATION, declared_outputs
from emergence.core.io import PipelineError, remove_tree
from emergence.core.models.hf import to_hf
from emergence.core.train.checkpoint import list_checkpoints, load_checkpoint, write_failed

TOLERANCE = 1e-5  # max |logit difference| between our model and the loaded export
TARGETS = ("hf", "transformer-lens")
MARKER = ".emergence-export.json"  # what the export wrote: the only folder content --force may replace
KEPT = ("data", "reports")  # a checkout's artifacts (DVC cache and scratch included) and committed reports


def step_dir_of(path: Path) -> Path:
    """A `step{N}` folder as given, or a run folder's last one."""
    if (path / "config.json").is_file():
        return path
    ckpts = list_checkpoints(path) if path.is_dir() else []
    if not ckpts:
        raise PipelineError(f"{path}: neither a checkpoint folder (config.json, model.safetensors) nor a run of them")
    return ckpts[-1][1]


def vocabulary(spec: str, d_vocab: int) -> tuple[list[str], str]:
    """(tokens by id, kind) of `--tokenizer`: "binding" (the binding study's characters) or a vocabulary
    JSON of grounding_vocab / visual_vocab (words, whitespace-separated, <unk> first)."""
    if spec == "binding":
        from emergence.studies.binding.tokenizer import VOCAB

        tokens, kind = list(VOCAB), "chars"
    else:
        from emergence.studies.grounding.tokens import read_vocab

        tokens, kind = read_vocab(spec)[1], "words"
    if len(tokens) != d_vocab:
        raise PipelineError(f"--tokenizer {spec}: {len(tokens)} tokens, the model has d_vocab {d_vocab}")
    return tokens, kind


def hf_tokenizer(tokens: list[str], kind: str):
    """A fast tokenizer with our ids: characters one token each (the binding study), or whitespace words
    with <unk> for the rest (grounding)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    ids = {t: i for i, t in enumerate(tokens)}
    if kind == "chars":  # <pad> (id 0) never comes out of text: every character is its own token
        tok = Tokenizer(models.WordLevel(ids, unk_token="<pad>"))
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        tok.decoder = decoders.Fuse()
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>")
    tok = Tokenizer(models.WordLevel(ids, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def tokenizer_for(step_dir: Path, given: str | None) -> str:
    """--tokenizer, or the one the checkpoint's place in params.yaml's paths implies."""
    if given:
        return given
    params = Path("params.yaml")
    paths = {}
    if params.is_file():
        import yaml

        paths = (yaml.safe_load(params.read_text(encoding="utf-8")) or {}).get("paths", {})
    where = step_dir.resolve()
    runs = {"binding_runs": "binding", "binding_aid_runs": "binding", "grounding_runs": paths.get("grounding_vocab"),
            "visual_runs": paths.get("visual_vocab")}  # fmt: skip
    for key, spec in runs.items():
        if key in paths and spec and where.is_relative_to(Path(paths[key]).resolve()):
            return spec
    raise PipelineError(
        f"{step_dir}: not under a run folder of params.yaml; name its --tokenizer (binding or a vocab JSON)"
    )


def max_logit_difference(
    ours: torch.nn.Module, theirs, d_vocab: int, n_ctx: int | None, seed: int = 0, view=lambda logits: logits
) -> float:
    """Max |logit difference| on 4 random sequences of min(n_ctx, 32) tokens, of both sides' `view` of them."""
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed)
        idx = torch.randint(0, d_vocab, (4, min(n_ctx or 32, 32)), generator=g)  # (B, T)
        return float((view(ours(idx)[0]) - view(theirs(idx))).abs().max())  # ours: (logits, loss)


def export(checkpoint: Path, out: Path, to: str = "hf", tokenizer: str | None = None, force: bool = False) -> float:
    """Write the export of `checkpoint` into `out` (see the module doc); returns the checked logit difference."""
    if to not in TARGETS:
        raise PipelineError(f"--to {to}: one of {', '.join(TARGETS)}")
    _may_write(out, force)
    step_dir = step_dir_of(checkpoint)
    model, info = load_checkpoint(step_dir)
    hf = to_hf(model)
    if hasattr(hf.config, "rescale_prenorm_residual"):
        hf.config.rescale_prenorm_residual = False  # else from_pretrained shrinks out_proj by sqrt(n_layers)
    cfg = info["config"]
    tokens, kind = vocabulary(tokenizer_for(step_dir, tokenizer), cfg["d_vocab"])
    part = out.with_name(f".{out.name}.partial-{os.getpid()}")
    remove_tree(part, ignore_errors=True)  # our own leftover of a killed run with this pid only
    try:
        with _write_errors(out, model):
            part.mkdir(parents=True)  # ours alone: a folder already there (someone else's) stops it
            hf.save_pretrained(part, safe_serialization=True)
            hf_tokenizer(tokens, kind).save_pretrained(part)
            told = json.dumps({"source": str(step_dir), **info}, indent=2)
            (part / "emergence.json").write_text(told, encoding="utf-8")
            _mark(part, step_dir, to)
        diff = _check(model, part, to, cfg)
        with _write_errors(out, model):
            _replace(part, out, force)
    finally:
        remove_tree(part, ignore_errors=True)
    return diff


@contextlib.contextmanager
def _write_errors(out: Path, model: torch.nn.Module) -> Iterator[None]:
    """A read-only, full or forbidden target as one line naming `out`, not a traceback; the caller removes
    the partial folder and `_replace` puts an earlier export back, so nothing is changed."""
    try:
        yield
    except (OSError, SafetensorError) as e:
        needed = sum(t.numel() * t.element_size() for t in model.state_dict().values())
        raise write_failed(out, "export", needed, e, "nothing was changed") from e


def _mark(folder: Path, step_dir: Path, to: str) -> None:
    """Written last: it lists every file of the export, so a folder with more in it is no export."""
    files = sorted(p.name for p in folder.iterdir())
    (folder / MARKER).write_text(
        json.dumps({"source": str(step_dir), "to": to, "files": files}, indent=2), encoding="utf-8"
    )


def _may_write(out: Path, force: bool) -> None:
    """Refuse, in one line and before anything is written, an `out` whose replacing could lose anything
    but an empty folder or a previous export."""
    if stage := _stage_holding(out):
        raise PipelineError(f"{out}: {stage}; export never writes there (DVC tracks that folder), nothing was changed")
    if not (out.exists() or out.is_symlink()):
        return
    if why := _protected(out):
        raise PipelineError(f"{out}: {why}; export never replaces it, nothing was changed")
    if not any(out.iterdir()):
        return  # an empty folder is no one's work
    others = _not_exported(out)
    if not force:
        held = f"it holds {_some(others)}, which no export wrote" if others else "it holds a previous export"
        raise PipelineError(
            f"{out}: exists and is not empty (--force replaces it only if it holds a previous export "
            f"and nothing else; {held})"
        )
    if others:
        raise PipelineError(
            f"{out}: holds {_some(others)}, which no export wrote (not listed in its {MARKER}); "
            "--force replaces only a previous export, nothing was changed"
        )


def _some(names: list[str]) -> str:
    return names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else "")


def _not_exported(folder: Path) -> list[str]:
    """The entries of `folder` that its marker does not list: all of them when there is no marker of ours."""
    try:
        listed = {*json.loads((folder / MARKER).read_text(encoding="utf-8"))["files"], MARKER}
    except (OSError, ValueError, KeyError, TypeError):  # none, unreadable, or not the JSON export writes
        listed = set()
    return sorted(p.name for p in folder.iterdir() if p.name not in listed)


def _protected(out: Path) -> str | None:
    """Why the existing `out` is never replaced, whatever it holds; None when it may be."""
    if out.is_symlink():
        return "a symbolic link (name the folder it leads to)"
    if not out.is_dir():
        return "exists and is not a folder"
    where = out.resolve()
    if Path.cwd().resolve().is_relative_to(where):
        return "the current folder or one of its parents"
    if {".git", ".dvc"} & set(where.parts):
        return "git's or DVC's own folder"
    if any((where / name).exists() for name in (".git", ".dvc", PARAMS_FILE)):
        return "a checkout (it holds .git, .dvc or params.yaml)"
    return _kept_folders().get(where)


def _stage_holding(out: Path) -> str | None:
    """Which stage's declared output `out` is or lies in (pipeline.yaml's outs and metrics, resolved with
    params.yaml, of the current folder and of its checkout); None when none. A folder added inside a
    tracked output makes DVC see it modified, and the stage's next run deletes it with the output."""
    where = out.resolve()
    for base in _bases():
        if not (base / DECLARATION).is_file() or not (base / PARAMS_FILE).is_file():
            continue
        for instance, declared in declared_outputs(base, read_params(base / PARAMS_FILE)):
            held = (base / declared).resolve()
            if where == held or where.is_relative_to(held):
                how = "is" if where == held else "lies inside"
                return f"{how} {os.path.relpath(held)}, an output of stage {instance} in {DECLARATION}"
    return None


def _bases() -> list[Path]:
    """The current folder and the checkout holding it (the nearest with .git), where the pipeline runs."""
    here = Path.cwd().resolve()
    root = next((p for p in (here, *here.parents) if (p / ".git").exists()), here)
    return list(dict.fromkeys((here, root)))


def _kept_folders() -> dict[Path, str]:
    """data/, reports/ and every folder params.yaml's paths name or hold, resolved, each with why: of the
    current folder and of the checkout holding it (the nearest with .git), where the pipeline runs."""
    kept = {}
    for base in _bases():
        kept |= {base / name: f"the checkout's {name}/ folder" for name in KEPT}
        for key, value in _paths(base / PARAMS_FILE).items():
            named = (base / value).resolve()
            where = f"{os.path.relpath(base / PARAMS_FILE)}'s paths.{key}"
            kept.setdefault(named, f"named by {where}")
            kept.update({parent: f"holds {value}, named by {where}" for parent in named.parents if parent not in kept})
    return kept


def _paths(params: Path) -> dict[str, str]:
    """The `paths:` section of a params file, its path values only; {} without the file or the section."""
    values = read_params(params) if params.is_file() else {}
    paths = section(values, "paths") if "paths" in values else {}
    return {key: value for key, value in paths.items() if isinstance(value, str) and value}


def _check(model: torch.nn.Module, folder: Path, to: str, cfg: dict) -> float:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).eval()
    AutoTokenizer.from_pretrained(folder, local_files_only=True)
    diff = max_logit_difference(model, lambda idx: loaded(idx).logits, cfg["d_vocab"], cfg.get("n_ctx"))
    if to == "transformer-lens":
        from emergence.export_lens import bridge_logits, centred

        diff = max(diff, max_logit_difference(model, bridge_logits(folder), cfg["d_vocab"], cfg.get("n_ctx")))
        compatible = bridge_logits(folder, compatibility=True)  # logits moved by a constant per position
        diff = max(diff, max_logit_difference(model, compatible, cfg["d_vocab"], cfg.get("n_ctx"), view=centred))
    if not diff <= TOLERANCE:
        raise PipelineError(f"export check: loaded back, the logits differ from ours by {diff:.2e} (> {TOLERANCE})")
    return diff


def _replace(part: Path, out: Path, force: bool) -> None:
    """`part` becomes `out`; an `out` that was there is moved aside, and removed only once `part` is in
    place, or put back when `part` cannot take its place."""
    _may_write(out, force)  # again: in the time the check took, something may have been written there
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        out.rename(old)
    try:
        part.rename(out)
    except OSError:
        if old.exists():
            old.rename(out)
        raise
    # the export is in place: an earlier one that cannot be removed stays beside it, hidden, not in the way
    remove_tree(old, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emergence export", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="a step{N} checkpoint folder, or a run folder (its last)")
    parser.add_argument(
        "--to", choices=TARGETS, default="hf", help="hf, or transformer-lens (also checks TransformerLens 4 loads it)"
    )
    parser.add_argument("out", type=Path, help="the folder to write")
    parser.add_argument(
        "--tokenizer", help="binding, or a vocabulary JSON (default: from the checkpoint's place in params.yaml)"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace OUT if it holds a previous export (and nothing else)"
    )
    args = parser.parse_args(argv)
    hf_logging.disable_progress_bar()  # a small folder: no bars for writing and loading it back
    try:
        diff = export(args.checkpoint, args.out, args.to, args.tokenizer, args.force)
    except PipelineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{args.out}: written; loaded back, max logit difference {diff:.1e}")
    return 0
