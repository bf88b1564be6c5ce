"""Bad input ends a stage cleanly: one error line naming the file or key, a
non-zero exit, and no partial artifact (outputs absent, or byte-identical to
what was there before). Every case runs the real CLI (`python -m stages.X`)
in its own copy of a tiny workspace; an interrupted training run leaves no
published run and resumes to the same bits as an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import safetensors.torch
import torch
import yaml
from conftest import ROOT
from forked import run_modules
from refusals import assert_names

from emergence.core.pipeline import stage_command

# `stages` is importable from the project root only; this checkout's src first, even where the
# venv's editable install points at another checkout
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
RUN0 = "data/binding/runs/seed0"
FINAL = f"{RUN0}/step30"  # tiny profile: 30 steps
PROGRAMS = "data/binding/programs.parquet"
USER_CORPUS = "data/user/stories.txt"
ASSOC_CORPUS = "data/assoc/corpus.safetensors"
ASSOC_L1 = ["--layers", "1", "--seed", "0"]
USER_CHAT = "data/user/session.cha"
TURNS = "data/grounding/turns.parquet"


def stage(root: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", *stage_command(name, ROOT), *args]
    return subprocess.run(cmd, cwd=root, env=ENV, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """programs.parquet and seed 0's trained run at the tiny profile, threads 1."""
    root = tmp_path_factory.mktemp("workspace")
    shutil.copy(ROOT / "params.yaml", root / "params.yaml")
    shutil.copytree(ROOT / "resources", root / "resources")  # the noun list and templates params name
    subprocess.run(
        [sys.executable, "-m", "emergence.core.profile", str(ROOT / "profiles" / "tiny.yaml")],
        cwd=root,
        env=ENV,
        check=True,
        capture_output=True,
    )
    for name, *args in (("binding_data",), ("binding_train", "--seed", "0")):
        proc = stage(root, name, *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert (root / FINAL / "model.safetensors").is_file()
    return root


# ---- breaking a workspace ---------------------------------------------------


def set_param(dotted: str, value: Any) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        params = yaml.safe_load((root / "params.yaml").read_text())
        *parents, key = dotted.split(".")
        node = params
        for name in parents:
            node = node[name]
        node[key] = value
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    return apply


def broken_yaml(root: Path) -> None:
    with open(root / "params.yaml", "a") as f:
        f.write("binding_ablation: [zero, mean\n")


def truncate(rel: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        path = root / rel
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    return apply


def write_json(rel: str, obj: dict) -> Callable[[Path], None]:
    return lambda root: (root / rel).write_text(json.dumps(obj))


def foreign_weights(root: Path) -> None:
    safetensors.torch.save_file({"wte.weight": torch.zeros(3, 4)}, str(root / FINAL / "model.safetensors"))


def rewrite_parquet(rel: str, edit: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        edit(pd.read_parquet(root / rel)).to_parquet(root / rel)

    return apply


def text_file(rel: str, text: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    return apply


def assoc_source(content: bytes) -> Callable[[Path], None]:
    """Point the association study at a user corpus file holding `content`."""

    def apply(root: Path) -> None:
        (root / USER_CORPUS).parent.mkdir(parents=True, exist_ok=True)
        (root / USER_CORPUS).write_bytes(content)
        set_param("paths.assoc_source", USER_CORPUS)(root)

    return apply


CHAT_OK = (
    "@UTF8\n@Begin\n@Languages:\teng\n@Participants:\tCHI Target_Child, MOT Mother\n"
    "*MOT:\tlook at the ball .\n%act:\tpicks up ball\n*CHI:\tball !\n@End\n"
)


def chat_source(text: str) -> Callable[[Path], None]:
    """Point the grounding study at one CHAT file holding `text`."""

    def apply(root: Path) -> None:
        (root / USER_CHAT).parent.mkdir(parents=True, exist_ok=True)
        (root / USER_CHAT).write_text(text)
        set_param("paths.childes_source", USER_CHAT)(root)

    return apply


def few_noun_turns(root: Path) -> None:
    turns = pd.DataFrame(
        {
            "file": ["a.cha"],
            "line": [5],
            "speaker": ["MOT"],
            "env": [["ball"]],
            "lan": [["ball"]],
            "tokens": [["<MOT>", "ball<ENV>", "ball<LAN>"]],
        }
    )
    (root / TURNS).parent.mkdir(parents=True, exist_ok=True)
    turns.to_parquet(root / TURNS)
    set_param("grounding_vocab.min_count", 1)(root)


def metrics_only_run(root: Path) -> None:
    set_param("base.seeds", [0, 7])(root)
    (root / "data/binding/runs/seed7").mkdir()
    shutil.copy(root / RUN0 / "metrics.parquet", root / "data/binding/runs/seed7")


VISUAL_RUN = ["--setting", "caption", "--model", "transformer4", "--seed", "0"]
VISUAL_SALIENCY = "data/visual/saliency/caption_transformer4_seed0.parquet"


def parquet_file(rel: str, table: pd.DataFrame) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        table.to_parquet(root / rel)

    return apply


def visual_gain_only(root: Path) -> None:
    """Gain tables of every visual run (tiny profile: caption and image, seed 0), nothing downstream."""
    for setting in ("caption", "image"):
        gain = pd.DataFrame(
            {"setting": [setting], "model": "transformer4", "seed": 0, "step": 0, "word": "dog", "gain": 0.1}
        )
        parquet_file(f"data/visual/gain/{setting}_transformer4_seed0.parquet", gain)(root)


HF_CONFIG = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_layer": 12}
OWN_FORMAT = {"format": "emergence-checkpoint-v1", "arch": "transformer", "step": 30}


@dataclass
class Case:
    breaks: Callable[[Path], None]
    argv: list[str]  # stage name and arguments
    names: list[str]  # what the error line must name: file, dotted key, value, column
    seed: int = 0  # whose outputs must stay untouched
    existing: dict[str, str] = field(default_factory=dict)  # outputs present before the run


CASES = {
    # malformed params
    "params_unknown_key": Case(set_param("binding_data.n_hops", 2), ["binding_data"], ["binding_data.n_hops"]),
    "params_wrong_type": Case(
        set_param("binding_train.lr", "fast"), ["binding_train", "--seed", "0"], ["binding_train.lr"]
    ),
    "params_hops_exceed_lines": Case(
        set_param("binding_programs.max_hops", 6), ["binding_data"], ["binding_programs.max_hops"]
    ),
    "params_context_too_small": Case(
        set_param("binding_model.n_ctx", 8), ["binding_train", "--seed", "0"], ["binding_model.n_ctx"]
    ),
    "params_bad_model_value": Case(
        set_param("binding_model.n_heads", 0), ["binding_train", "--seed", "0"], ["binding_model.n_heads"]
    ),
    "params_duplicate_seed": Case(set_param("base.seeds", [0, 0]), ["binding_train", "--seed", "0"], ["base.seeds"]),
    "params_missing_step": Case(
        set_param("binding_patching.checkpoint", "step999"),
        ["binding_patching", "--seed", "0"],
        ["binding_patching.checkpoint", "step999"],
    ),
    "params_invalid_yaml": Case(broken_yaml, ["binding_ablation", "--seed", "0"], ["params.yaml"]),
    # truncated, foreign or missing checkpoints
    "checkpoint_truncated_trajectory": Case(
        truncate(f"{FINAL}/model.safetensors"), ["binding_trajectory", "--seed", "0"], [f"{FINAL}/model.safetensors"]
    ),
    "checkpoint_truncated_ablation": Case(
        truncate(f"{FINAL}/model.safetensors"),
        ["binding_ablation", "--seed", "0"],
        [f"{FINAL}/model.safetensors"],
        existing={"data/binding/ablation/seed0.parquet": "from an earlier run"},
    ),
    "checkpoint_foreign_config": Case(
        write_json(f"{FINAL}/config.json", HF_CONFIG), ["binding_patching", "--seed", "0"], [f"{FINAL}/config.json"]
    ),
    "checkpoint_bad_config_value": Case(
        write_json(f"{FINAL}/config.json", {**OWN_FORMAT, "config": {"n_layers": 0}}),
        ["binding_ablation", "--seed", "0"],
        [f"{FINAL}/config.json", "n_layers"],
    ),
    "checkpoint_foreign_weights": Case(
        foreign_weights, ["binding_ablation", "--seed", "0"], [f"{FINAL}/model.safetensors"]
    ),
    "checkpoint_missing_run": Case(  # seed 7 listed (an unlisted seed is refused before any read)
        set_param("base.seeds", [0, 7]), ["binding_trajectory", "--seed", "7"], ["data/binding/runs/seed7"], seed=7
    ),
    "checkpoint_empty_run": Case(
        metrics_only_run, ["binding_trajectory", "--seed", "7"], ["data/binding/runs/seed7"], seed=7
    ),
    # Parquet inputs with the wrong schema
    "parquet_missing_column": Case(
        rewrite_parquet(PROGRAMS, lambda df: df.drop(columns="hops")),
        ["binding_train", "--seed", "0"],
        [PROGRAMS, "hops"],
    ),
    "parquet_wrong_dtype": Case(
        rewrite_parquet(PROGRAMS, lambda df: df.assign(hops=df["hops"].astype(str))),
        ["binding_ablation", "--seed", "0"],
        [PROGRAMS, "hops"],
    ),
    "parquet_not_parquet": Case(
        text_file(PROGRAMS, "program,answer\na=1#a:,1\n"),
        ["binding_trajectory", "--seed", "0"],
        [PROGRAMS],
        existing={"data/binding/trajectory/seed0.parquet": "from an earlier run"},
    ),
    # association corpora (tiny profile: T = 12, vocabulary 64)
    "corpus_empty": Case(assoc_source(b""), ["assoc_corpus"], [USER_CORPUS]),
    "corpus_one_type": Case(
        assoc_source(b"dog dog dog dog dog dog dog dog dog dog dog dog dog dog\n" * 5),
        ["assoc_corpus"],
        [USER_CORPUS, "one"],
    ),
    "corpus_too_short": Case(
        assoc_source(b"the dog ran.<|endoftext|>" * 10), ["assoc_corpus"], [USER_CORPUS, "13 tokens"]
    ),
    "corpus_not_utf8": Case(assoc_source(b"the dog ran \xff\xfe and sat"), ["assoc_corpus"], [USER_CORPUS]),
    "corpus_bad_format": Case(set_param("assoc_corpus.format", "csv"), ["assoc_corpus"], ["assoc_corpus.format"]),
    "corpus_corrupt_for_training": Case(
        text_file(ASSOC_CORPUS, "not safetensors"), ["assoc_train", *ASSOC_L1], [ASSOC_CORPUS]
    ),
    # CHAT transcripts and the grounding vocabulary
    "chat_missing_end": Case(chat_source(CHAT_OK.replace("@End\n", "")), ["childes_extract"], [USER_CHAT, "@End"]),
    "chat_unknown_speaker": Case(
        chat_source(CHAT_OK.replace("*CHI:", "*FAT:")), ["childes_extract"], [USER_CHAT, "line 7", "FAT"]
    ),
    "chat_tier_before_main": Case(
        chat_source(CHAT_OK.replace("*MOT:\tlook at the ball .\n", "")), ["childes_extract"], [USER_CHAT, "line 5"]
    ),
    "grounding_too_few_nouns": Case(
        few_noun_turns, ["grounding_vocab"], ["grounding_vocab.n_words", "1 of the", "min_count="]
    ),
    "grounding_model_not_defined": Case(
        set_param("grounding_runs.models", ["transformer4", "gpt9"]),
        ["grounding_train", "--model", "gpt9", "--seed", "0"],
        ["grounding_models.gpt9", "transformer4"],  # the model, and the models there are
    ),
    "grounding_heads_bad_threshold": Case(
        set_param("grounding_heads.threshold", 0),
        ["grounding_heads", "--model", "transformer4", "--seed", "0"],
        ["grounding_heads.threshold"],
    ),
    "grounding_lens_bad_steps": Case(
        set_param("grounding_lens.steps", 0),
        ["grounding_lens", "--model", "lstm4", "--seed", "0"],
        ["grounding_lens.steps"],
    ),
    "grounding_cooc_bad_feature": Case(
        set_param("grounding_cooc.features", ["zipf"]), ["grounding_cooc"], ["grounding_cooc.features"]
    ),
    "grounding_ablation_no_draws": Case(
        set_param("grounding_ablation.n_draws", 0),
        ["grounding_ablation", "--model", "transformer4", "--seed", "0"],
        ["grounding_ablation.n_draws"],
    ),
    # which runs exist, and which of them the attention analyses read, is python -m emergence check's
    # business (tests/unit/test_check.py); a stage run by hand still refuses a setting it cannot build
    "visual_unknown_setting": Case(
        lambda root: None,
        ["visual_train", "--setting", "audio", "--model", "transformer4", "--seed", "0"],
        ["--setting", "audio"],
    ),
    "visual_heads_bad_threshold": Case(
        set_param("visual_heads.threshold", 1.5), ["visual_heads", *VISUAL_RUN], ["visual_heads.threshold"]
    ),
    "visual_ablation_no_draws": Case(
        set_param("visual_ablation.n_draws", 0), ["visual_ablation", *VISUAL_RUN], ["visual_ablation.n_draws"]
    ),
    "visual_heads_saliency_schema": Case(
        parquet_file(
            VISUAL_SALIENCY, pd.DataFrame({"setting": ["caption"], "model": "transformer4", "seed": 0, "step": 0})
        ),
        ["visual_heads", *VISUAL_RUN],
        [VISUAL_SALIENCY, "layer"],
    ),
    "visual_ablation_heads_not_parquet": Case(
        text_file("data/visual/heads/caption_transformer4_seed0.parquet", "step,layer\n0,1\n"),
        ["visual_ablation", *VISUAL_RUN],
        ["data/visual/heads/caption_transformer4_seed0.parquet"],
    ),
    "visual_report_missing_saliency": Case(visual_gain_only, ["visual_report"], [VISUAL_SALIENCY, "not found"]),
    "parquet_metrics_schema": Case(
        rewrite_parquet(f"{RUN0}/metrics.parquet", lambda df: df.drop(columns="loss")),
        ["binding_trajectory", "--seed", "0"],
        [f"{RUN0}/metrics.parquet", "loss"],
    ),
}


# ---- running every case ------------------------------------------------------


def stage_outputs(root: Path, stage_name: str, seed: int) -> list[str]:
    """The stage's outs and metrics as dvc.yaml declares them, resolved with this workspace's paths."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][stage_name]
    paths = yaml.safe_load((root / "params.yaml").read_text())["paths"]

    def resolve(template: str) -> str:
        return (
            re.sub(r"\$\{paths\.(\w+)\}", lambda m: paths[m.group(1)], template)
            .replace("${item.seed}", str(seed))
            .replace("${item.layers}", "1")
            .replace("${item.model}", "transformer4")
            .replace("${item.setting}", "caption")
        )

    return [resolve(out) for out in spec.get("outs", []) + spec.get("metrics", [])]


def snapshot(path: Path) -> str | dict[str, str] | None:
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    if path.is_dir():
        return {
            str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*"))
            if p.is_file()
        }
    return None


@dataclass
class Outcome:
    root: Path
    code: int
    stderr: str
    before: dict[str, Any]


@pytest.fixture(scope="module")
def outcomes(workspace, tmp_path_factory) -> dict[str, Outcome]:
    base = tmp_path_factory.mktemp("cases")
    commands, before = [], {}
    for name, case in CASES.items():
        root = base / name
        shutil.copytree(workspace, root)
        outputs = stage_outputs(root, case.argv[0], case.seed)  # before the params may be broken
        for rel, text in case.existing.items():
            text_file(rel, text)(root)
        case.breaks(root)
        before[name] = {rel: snapshot(root / rel) for rel in outputs}
        commands.append((root, [*stage_command(case.argv[0], ROOT), *case.argv[1:]]))
    procs = run_modules(commands, ENV)  # one interpreter start for all the cases (tests/forked.py)
    return {name: Outcome(base / name, proc.returncode, proc.stderr, before[name]) for name, proc in zip(CASES, procs)}


def error_line(stderr: str) -> str:
    """The one error line, which must come last; anything before it may only be progress-bar redraws."""
    lines = stderr.rstrip("\n").split("\n")
    assert lines[-1].startswith("error: "), stderr[-3000:]
    assert all(line.startswith("\r") for line in lines[:-1]), stderr[-3000:]
    return lines[-1]


@pytest.mark.parametrize("name", CASES)
def test_bad_input_fails_with_one_line_naming_it(outcomes, name):
    outcome = outcomes[name]
    assert outcome.code == 1, outcome.stderr[-3000:]
    line = error_line(outcome.stderr)
    assert_names(line, *CASES[name].names)
    if name.startswith("params_"):  # params are checked before any work, so nothing else is printed
        assert outcome.stderr.count("\n") == 1


@pytest.mark.parametrize("name", CASES)
def test_bad_input_leaves_no_partial_artifact(outcomes, name):
    outcome = outcomes[name]
    assert outcome.before, "the stage declares outputs"
    after = {rel: snapshot(outcome.root / rel) for rel in outcome.before}
    assert after == outcome.before  # absent stays absent, existing stays byte-identical
    for rel, text in CASES[name].existing.items():
        assert (outcome.root / rel).read_text() == text
    leftovers = [p for top in ("data", "reports") for p in (outcome.root / top).rglob(".*.tmp")]
    assert leftovers == []


# ---- interrupted training -----------------------------------------------------


def launch(
    root: Path, name: str = "binding_train", *args: str, stderr: Any = subprocess.PIPE, **env: str
) -> subprocess.Popen:
    # Python only turns SIGINT into KeyboardInterrupt if SIGINT is not ignored when it starts.
    args = args or (("--seed", "1") if name == "binding_train" else ())
    return subprocess.Popen(
        [sys.executable, "-m", *stage_command(name, ROOT), *args],
        cwd=root,
        env={**ENV, **env},
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def step_dirs(scratch: Path) -> set[str]:
    return {p.name for p in scratch.glob("step*")} if scratch.is_dir() else set()


def interrupt_when(proc: subprocess.Popen, ready: Callable[[], bool], sig: int) -> tuple[int, str]:
    deadline = time.monotonic() + 120
    while not ready():
        ended = proc.poll() is not None
        assert not ended, f"the run ended before it could be interrupted:\n{proc.stderr and proc.stderr.read()}"
        assert time.monotonic() < deadline, "the run never got far enough to be interrupted"
        time.sleep(0.01)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def test_interrupted_training_publishes_nothing_and_resumes_exactly(workspace, tmp_path):
    shutil.copytree(workspace, tmp_path / "run")
    root = tmp_path / "run"
    set_param("binding_train.steps", 150)(root)  # long enough to be caught mid-run
    shutil.copytree(root, tmp_path / "reference")
    reference = launch(tmp_path / "reference")  # the same run, never interrupted (concurrently: threads are fixed)
    scratch, published = root / "data/scratch/binding/seed1", root / "data/binding/runs/seed1"

    code, err = interrupt_when(launch(root), lambda: (scratch / "resume").exists(), signal.SIGINT)
    assert code == 130, err
    assert err.count("\n") == 1 and err.startswith("error: interrupted"), err
    assert not published.exists()
    reached = step_dirs(scratch)

    code, err = interrupt_when(launch(root), lambda: len(step_dirs(scratch)) > len(reached), signal.SIGKILL)
    assert code == -signal.SIGKILL, err
    assert "resuming from step" in err, err
    assert not published.exists()

    final = stage(root, "binding_train", "--seed", "1")
    assert final.returncode == 0, final.stderr[-3000:]
    assert "resuming from step" in final.stderr
    assert [p for p in (root / "data/binding").rglob(".*.tmp")] == []  # scratch may keep a killed run's temps
    assert reference.wait(timeout=300) == 0, reference.stderr.read()[-3000:]
    expected = tmp_path / "reference/data/binding/runs/seed1"
    files = sorted(str(p.relative_to(published)) for p in published.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(expected)) for p in expected.rglob("*") if p.is_file())
    for rel in files:
        if rel.endswith(".safetensors"):
            got, want = safetensors.torch.load_file(published / rel), safetensors.torch.load_file(expected / rel)
            assert got.keys() == want.keys()
            assert all(torch.equal(got[k], want[k]) for k in want), rel
        else:  # config.json, metrics.parquet
            assert (published / rel).read_bytes() == (expected / rel).read_bytes(), rel


def test_killed_feature_caching_keeps_the_cache_usable_and_the_features_identical(workspace, tmp_path):
    shutil.copytree(workspace, tmp_path / "run")
    root = tmp_path / "run"
    for name in ("visual_scenes", "visdial_extract"):
        proc = stage(root, name)
        assert proc.returncode == 0, proc.stderr[-2000:]
    shutil.copytree(root, tmp_path / "reference")
    reference = stage(tmp_path / "reference", "dino_features")
    assert reference.returncode == 0, reference.stderr[-2000:]
    cache = root / "data/cache/dino"

    def some_cached() -> bool:
        return any(cache.rglob("*.safetensors"))

    code, _ = interrupt_when(launch(root, "dino_features"), some_cached, signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert not (root / "data/visual/features").exists()  # nothing published
    again = stage(root, "dino_features")
    assert again.returncode == 0, again.stderr[-2000:]
    for name in ("features.safetensors", "images.parquet"):
        got = (root / "data/visual/features" / name).read_bytes()
        assert got == (tmp_path / "reference/data/visual/features" / name).read_bytes(), name
    assert [p for p in (root / "data/visual").rglob(".*.tmp")] == []


def test_a_killed_analysis_publishes_nothing_and_reruns_to_the_same_table(workspace, tmp_path):
    shutil.copytree(workspace, tmp_path / "reference")
    ref = stage(tmp_path / "reference", "binding_trajectory", "--seed", "0")
    assert ref.returncode == 0, ref.stderr[-2000:]
    shutil.copytree(workspace, tmp_path / "run")
    root = tmp_path / "run"
    out = root / "data/binding/trajectory/seed0.parquet"
    log = tmp_path / "run.err"

    def midway() -> bool:  # by the run's own count, not a clock: at least one checkpoint scored, half still to go
        done = re.findall(r"checkpoints: +\d+%\|[^|]*\| (\d+)/(\d+) ", log.read_text())
        return any(0 < int(k) <= int(n) // 2 for k, n in done)

    with log.open("w") as err:  # every update of the bar printed, so 1/N is seen
        proc = launch(root, "binding_trajectory", "--seed", "0", stderr=err, TQDM_MININTERVAL="0")
        code, _ = interrupt_when(proc, midway, signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert not out.exists() and [p for p in (root / "data").rglob(".*.tmp")] == []
    again = stage(root, "binding_trajectory", "--seed", "0")
    assert again.returncode == 0, again.stderr[-2000:]
    assert out.read_bytes() == (tmp_path / "reference/data/binding/trajectory/seed0.parquet").read_bytes()
