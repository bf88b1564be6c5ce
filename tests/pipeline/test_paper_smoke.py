"""The paper profile's shapes through every stage on this CPU (profiles/paper_smoke.yaml after paper.yaml),
and each training job's memory estimate (core/resources.py) held against the peak RSS the run measured.

One Snakemake run for the module, on two cores (the engine a cluster run uses; the tiny run tests DVC, whose
lock file rewrite costs seconds per stage at this many stages): a shape, config or memory error the paper run
would hit on a GPU fails here first. The expected shapes are read from profiles/paper.yaml, not restated."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, project_copy, run
from safetensors import safe_open

from emergence.core.config import read_params
from emergence.core.pipeline import resolve_jobs
from emergence.core.resources import FLOOR_MB
from emergence.machine import device_job_estimates

pytestmark = [pytest.mark.pipeline, pytest.mark.paper_smoke]  # alone: `make paper-smoke` (CI runs it after `make test`)

PAPER = yaml.safe_load((ROOT / "profiles/paper.yaml").read_text())
# the paper profile's keys that shape a model or its data: paper_smoke may cut anything else
SHAPES = (
    "binding_model", "grounding_models", "grounding_train.seq_len", "grounding_vocab.n_words",
    "assoc_corpus.vocab_size", "assoc_corpus.seq_len", "assoc_runs.layers",
    "dino_features.image_size", "dino_features.name",
)  # fmt: skip


def _part_of(part, whole) -> bool:
    """Every key of `part` (nested) is in `whole` with the same value."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and _part_of(v, whole[k]) for k, v in part.items())
    return part == whole


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    root = project_copy(tmp_path_factory.mktemp("paper-smoke"), profile="paper")
    run([sys.executable, "-m", "emergence.core.profile", "paper_smoke"], root)
    run(["snakemake", "--cores", "2"], root)  # run alone (make paper-smoke): two stages of one thread each
    return root


def _config(run_dir: Path) -> dict:
    final = max(run_dir.glob("step*"), key=lambda p: int(p.name.removeprefix("step")))
    return json.loads((final / "config.json").read_text())


def test_every_stage_ran_and_the_reports_exist(smoke):
    assert "Nothing to be done" in run(["snakemake", "--cores", "1", "-n"], smoke).stdout
    params = read_params(smoke / "params.yaml")
    for key in ("binding_report", "assoc_report", "grounding_report", "visual_report", "index_report"):
        assert (smoke / params["paths"][key]).stat().st_size > 0, key


def test_the_models_and_data_have_the_paper_profiles_shapes(smoke):
    params = read_params(smoke / "params.yaml")
    for key in SHAPES:  # the merged params still hold the paper profile's value of every shape key
        section, _, name = key.partition(".")
        assert _part_of(
            PAPER[section][name] if name else PAPER[section], params[section][name] if name else params[section]
        ), key
    binding = _config(smoke / "data/binding/runs/seed0")
    assert binding["meta"]["train"]["precision"] == "fp32"  # paper_smoke's one change of a training setting
    for key in ("n_layers", "d_model", "n_heads", "d_mlp", "n_ctx"):
        assert binding["config"][key] == PAPER["binding_model"][key], key
    for name in PAPER["grounding_runs"]["models"]:  # every paper architecture trained, at its shape
        cfg = _config(smoke / f"data/grounding/runs/{name}_seed0")["config"]
        for key, value in PAPER["grounding_models"][name].items():
            assert cfg[key] == value, (name, key)
        assert cfg["n_ctx"] >= PAPER["grounding_train"]["seq_len"]
    with safe_open(smoke / "data/assoc/corpus.safetensors", "pt") as f:
        sequences = f.get_tensor("sequences")
    vocab = json.loads((smoke / "reports/metrics/assoc_corpus.json").read_text())
    assert sequences.shape[1] == PAPER["assoc_corpus"]["seq_len"] + 1
    assert vocab["vocab_size"] == PAPER["assoc_corpus"]["vocab_size"]  # the stand-in stories reach |V| = 3000
    chosen = json.loads((smoke / "data/grounding/vocab.json").read_text())
    assert len(chosen["targets"]) == PAPER["grounding_vocab"]["n_words"]
    encoder = json.loads((smoke / "data/visual/features/encoder.json").read_text())
    assert encoder["image_size"] == PAPER["dino_features"]["image_size"] and not encoder["pretrained"]


def test_each_device_jobs_memory_estimate_is_within_2x_of_its_measured_peak(smoke):
    """resources.py's estimate on this CPU (the process, weights, gradients, moments, activations)
    against the stage record's peak RSS: within a factor of 2 either way, or the formula is wrong. A
    device job the formula cannot size (the basis, the DINOv2 features) asks Slurm for FLOOR_MB: its
    peak must stay under that request."""
    params = read_params(smoke / "params.yaml")
    estimates = device_job_estimates(params, smoke, on_gpu=False)
    records = [json.loads(p.read_text()) for p in (smoke / "logs/stages").glob("*.json")]
    job_of = {job.cmd: job.name for job in resolve_jobs(yaml.safe_load((smoke / "dvc.yaml").read_text()), params)}
    assert all(r["engine"] == "snakemake" and r["command"] in job_of for r in records)  # a record names no stage
    measured = {job_of[r["command"]]: r["max_rss_mb"] for r in records if job_of[r["command"]] in estimates}
    assert set(measured) == set(estimates)  # every device job ran and was recorded
    sized = {job: need for job, need in estimates.items() if need is not None}
    assert len(sized) == 12 and {"dino_features", "assoc_basis"} <= set(estimates) - set(sized)  # 12: the aid run too
    ratios = {job: round(need / measured[job], 2) for job, need in sized.items()}
    assert all(0.5 <= r <= 2 for r in ratios.values()), ratios
    unsized = {job: measured[job] for job in set(estimates) - set(sized)}
    assert all(mb < FLOOR_MB for mb in unsized.values()), unsized
