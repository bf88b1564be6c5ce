"""End to end on the tiny profile: DVC, Snakemake after it, and the shared cache (Snakemake alone:
test_snakemake_run.py).

One module-scoped DVC run is shared by the tests below (each `dvc repro` of
the tiny profile trains two seeds, so the suite runs it as few times as it can).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from artifacts import ARTIFACTS, digest, downstream, dry_run_jobs, importers, ran_stages, set_param
from conftest import copy_run, run

from emergence.core.declared import GUARD
from emergence.studies.binding.stress import REFERENCE, STRESS


@pytest.fixture(scope="module")
def dvc_run(tiny_run, tmp_path_factory) -> Path:
    """This module's own copy of the session's tiny DVC run: the tests below edit params and rerun."""
    return copy_run(tiny_run, tmp_path_factory.mktemp("dvc") / "run")


def test_dvc_repro_builds_every_artifact(dvc_run):
    for rel in ARTIFACTS:
        assert (dvc_run / rel).is_file(), rel
    for seed in (0, 1):
        assert (dvc_run / f"data/binding/runs/seed{seed}/step30/model.safetensors").is_file()
    traj = pd.read_parquet(dvc_run / "data/binding/trajectory/seed0.parquet")
    assert {"seed", "step", "layer", "head", "metric", "hops", "value"} <= set(traj.columns)
    assert set(yaml.safe_load((dvc_run / "params.yaml").read_text())["base"]["seeds"]) == {0, 1}
    metrics = json.loads((dvc_run / "reports/metrics/binding.json").read_text())
    assert metrics, "metrics file is empty"
    stress = pd.read_parquet(dvc_run / "data/binding/stress/seed1.parquet")
    final = stress[stress["named"]]
    assert final[final["set"] != "gen"].groupby("set")["n"].sum().eq(3 * 4).all()  # 3 hop classes x 4
    assert final["set"].nunique() == len(STRESS) + len(REFERENCE) + 1
    assert set(metrics["stress"]) >= {"few_vars", "weakest", "reference", "curve"}
    assert sorted(stress["step"].unique()) == [0, 10, 20, 30]  # tiny: curve_every 10 over 30 steps
    # each aid variant trained as its overrides say, and stands beside the default of seed 1
    for aid, key, value in (
        ("plain", "pos", "learned"),
        ("no_conv", "conv_kernel", 0),
        ("no_line_values", "pos", "rope"),
    ):
        ckpt = json.loads((dvc_run / f"data/binding/aid_runs/{aid}/seed1/step30/config.json").read_text())
        assert ckpt["config"][key] == value, aid
        assert ckpt["meta"]["data_fingerprint"].startswith("line_values" if aid == "no_conv" else "answer_only"), aid
    assert set(metrics["aids"]) == {"default", "plain", "no_conv", "no_line_values"}
    assert all(set(by_seed) == {"seed1"} for by_seed in metrics["aids"].values())
    assert "Training aids taken away" in (dvc_run / "reports/binding.html").read_text()
    index = (dvc_run / "reports/index.html").read_text()
    assert all(f'href="{page}.html"' in index for page in ("binding", "associations", "grounding", "grounding_visual"))
    assert "encoder not pretrained" in (dvc_run / "reports/grounding_visual.html").read_text().lower()
    gain = pd.read_parquet(dvc_run / "data/grounding/gain/mamba4_seed0.parquet")
    assert {"model", "seed", "step", "word", "s_matched", "s_mismatched", "gain"} <= set(gain.columns)
    saliency = pd.read_parquet(dvc_run / "data/grounding/saliency/transformer4_seed0.parquet")
    assert {"model", "seed", "step", "layer", "head", "metric", "value"} <= set(saliency.columns)
    assert saliency["value"].between(0, 1).all() and set(saliency["layer"]) == {0, 1, 2, 3}
    lens = pd.read_parquet(dvc_run / "data/grounding/lens/mamba4_seed0.parquet")
    assert set(lens["lens"]) == {"tuned", "logit"} and set(lens["layer"]) == {0, 1, 2, 3, 4}
    report = (dvc_run / "reports/grounding.html").read_text()
    titles = ("Template grounding", "Natural-turn grounding", "Tuned lens", "Saliency flow", "Head ablation")
    assert all(title in report for title in (*titles, "Table 2 at CPU scale", "co-occurrence"))
    vocab = json.loads((dvc_run / "data/grounding/vocab.json").read_text())
    marked = [t for t in vocab["vocab"] if t.endswith(("<ENV>", "<LAN>"))]
    assert vocab["env_marking"] == "targets" and sorted(marked) == sorted(
        f"{w}{tag}" for w in vocab["targets"] for tag in ("<ENV>", "<LAN>")
    )  # the word rule: only target nouns carry the marks
    templates = pd.read_parquet(dvc_run / "data/grounding/template_gain/transformer4_seed0.parquet")
    n_templates = pd.read_parquet(dvc_run / "data/grounding/templates.parquet")["template"].nunique()
    per_step = templates.groupby("step").size()
    assert n_templates >= 20 and (per_step == n_templates * len(vocab["targets"])).all()
    cosines = pd.read_parquet(dvc_run / "data/assoc/cosines/L2_seed0.parquet")
    assert {"step", "seed", "layer", "weight", "cosine"} <= set(cosines.columns)
    early = cosines[cosines["in_window"]]
    assert set(early["weight"]) == {"W", "V", "W_O", "P"} and early["cosine"].min() > 0.99


def test_second_repro_runs_nothing_and_metrics_show(dvc_run):
    out = run(["dvc", "repro"], dvc_run).stdout
    assert ran_stages(out) == []
    assert "binding" in run(["dvc", "metrics", "show"], dvc_run).stdout


def test_analysis_param_reruns_only_that_analysis(dvc_run):
    set_param(dvc_run, "binding_ablation", "n_programs", 12)
    ran = ran_stages(run(["dvc", "repro"], dvc_run).stdout)
    assert sorted(ran) == ["binding_ablation@0", "binding_ablation@1", "binding_report", "index_report", GUARD]


def test_assoc_param_reruns_only_its_analysis(dvc_run):
    set_param(dvc_run, "assoc_compare", "window_epochs", 3)  # drops checkpoints 4 and 5 from the window
    ran = ran_stages(run(["dvc", "repro"], dvc_run).stdout)
    assert sorted(ran) == ["assoc_compare@1-0", "assoc_compare@2-0", "assoc_report", "index_report", GUARD]


def test_snakemake_after_dvc_leaves_dvc_clean(dvc_run):
    """Deterministic stages: whatever Snakemake reruns, it writes the same bytes."""
    before = digest(dvc_run)
    run(["snakemake", "--cores", "2"], dvc_run)
    assert digest(dvc_run) == before
    assert "up to date" in run(["dvc", "status"], dvc_run).stdout


# One module of each study, an interpretability tool and a core model: a compute edit to any of them
# must make both engines rerun exactly the stage instances whose code digest holds it.
EDITED = [
    "src/emergence/studies/binding/heuristics.py",
    "src/emergence/studies/assoc/theory.py",
    "src/emergence/studies/grounding/cooc.py",
    "src/emergence/interp/tuned_lens.py",
    "src/emergence/core/models/lstm.py",
]


@contextlib.contextmanager
def edited(root: Path, rel: str, text: bytes):
    """`rel` with `text` appended, then as it was, mtime included, and the digests as they were."""
    path = root / rel
    before, stat = path.read_bytes(), path.stat()
    try:
        path.write_bytes(before + text)
        yield
    finally:
        path.write_bytes(before)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        run(["dvc", "repro", GUARD], root)


def test_a_comment_reruns_nothing_but_the_guard(dvc_run):
    """The guard depends on every code file and rewrites the digests; a comment is in no digest."""
    lock = (dvc_run / "dvc.lock").read_bytes()
    with edited(dvc_run, EDITED[0], b"\n# a comment\n"):
        assert set(json.loads(run(["dvc", "status", "--json"], dvc_run).stdout)) == {GUARD}
        assert ran_stages(run(["dvc", "repro"], dvc_run).stdout) == [GUARD]
    assert (dvc_run / "dvc.lock").read_bytes() == lock


@pytest.mark.parametrize("rel", EDITED)
def test_editing_a_module_reruns_exactly_its_importers(dvc_run, rel):
    """Runs after both engines have built dvc_run; the edit is undone, mtime included.

    A compute edit: after the guard has run, DVC lists exactly the instances whose digest holds the file.
    Snakemake gives each job its digest as a param; it can compare params only for jobs it ran itself, so
    here it is held to: at most the importers and what they feed (test_snakemake_run.py holds
    a run Snakemake built to exactly those).
    """
    expected = importers(dvc_run, rel)
    assert expected, f"no stage imports {rel}"
    lock = (dvc_run / "dvc.lock").read_bytes()
    with edited(dvc_run, rel, b"\n_EDITED = 1\n"):
        run(["dvc", "repro", GUARD], dvc_run)
        stale = json.loads(run(["dvc", "status", "--json"], dvc_run).stdout)
        dry = run(["snakemake", "--cores", "1", "--dry-run"], dvc_run)
    assert (dvc_run / "dvc.lock").read_bytes() == lock
    assert set(stale) == expected
    assert set(dry_run_jobs(dvc_run, dry.stdout + dry.stderr)) <= downstream(dvc_run, expected) | {GUARD}


def test_push_then_fresh_clone_pulls_and_is_up_to_date(dvc_run, tmp_path):
    remote = tmp_path / "remote"
    run(["dvc", "remote", "modify", "--local", "shared", "url", str(remote)], dvc_run)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "lock"], dvc_run)
    run(["dvc", "push"], dvc_run)
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(dvc_run), str(clone)], tmp_path)
    run(["dvc", "remote", "modify", "--local", "shared", "url", str(remote)], clone)
    run(["dvc", "pull"], clone)
    assert "up to date" in run(["dvc", "status"], clone).stdout
    assert ran_stages(run(["dvc", "repro"], clone).stdout) == []
    assert digest(clone) == digest(dvc_run)


def test_adding_a_seed_trains_only_that_seed(dvc_run):
    """Runs last: it leaves three seeds in dvc_run."""
    set_param(dvc_run, "base", "seeds", [0, 1, 2])
    ran = ran_stages(run(["dvc", "repro"], dvc_run).stdout)
    assert sorted(ran) == [  # no LLC for it: binding_llc.seeds names the seeds that get one
        "binding_ablation@2",
        "binding_patching@2",
        "binding_report",
        "binding_stress@2",
        "binding_train@2",
        "binding_trajectory@2",
        "index_report",
        GUARD,  # it reads every section; its stamp's bytes do not change
    ]
