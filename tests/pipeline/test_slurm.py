"""The tiny profile's device stages through the Slurm executor on a real one-node cluster
(tests/slurm_cluster.py): one instance of each, with the stages it needs.

Slurm's own records say which jobs it ran and with which GPUs; the stages that compute on the device
(those declaring base.device, every training stage among them) must be exactly those jobs, each with a
GPU, and every other stage must have run locally. The artifacts must equal the DVC run's byte for byte.
"""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest
import yaml
from artifacts import digest
from conftest import project_copy, run
from slurm_cluster import ClusterError, slurm_cluster

from emergence.core.declared import GUARD
from emergence.core.pipeline import engine_declaration, resolve_jobs

# asks for the session's tiny run only at its end (a cluster problem fails first): scheduled with the
# files that wait on it, after it is built (tests/conftest.py), not beside its build
pytestmark = pytest.mark.late_tiny_run

# the accounting-free variant docs/slurm.md gives: this cluster has no slurmdbd, so `sacct` fails
NO_ACCOUNTING = [
    "--slurm-status-command",
    "squeue",
    "--slurm-no-account",
    "--slurm-init-seconds-before-status-checks",
    "5",
]


@pytest.fixture
def cluster(tmp_path):
    """A fresh cluster, stopped after the test; one that cannot start fails the test (CI or not)."""
    try:
        with slurm_cluster(tmp_path / "slurm") as c:
            yield c
    except ClusterError as e:
        pytest.fail(f"cannot start a one-node Slurm cluster: {e}")


def device_closure(root) -> tuple[list[str], Counter, set[str]]:
    """One instance of each stage that declares base.device (read straight from pipeline.yaml and params.yaml),
    and everything it needs: (their outputs as Snakemake targets, the device instances per stage, the
    other stages), so every device rule and its resources meet Slurm at a third of the tiny run's jobs."""
    dvc = engine_declaration(root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    device = {name for name, stage in dvc["stages"].items() if "base.device" in stage.get("params", [])}
    training = {
        name for name, stage in dvc["stages"].items() if re.match(r"python -m stages\.\w+\.train", stage["cmd"])
    }
    assert training and training <= device, f"training stages not computing on the device: {training - device}"
    jobs = resolve_jobs(dvc, params)
    firsts = {}
    for job in jobs:
        if job.name.split("@")[0] in device:
            firsts.setdefault(job.name.split("@")[0], job)
    producer = {out: job for job in jobs for out in job.outs}
    closure, todo = {}, list(firsts.values())
    while todo:
        job = todo.pop()
        closure[job.name] = job
        todo += [producer[p] for p in job.inputs if p in producer and producer[p].name not in closure]
    stage = {name: name.split("@")[0] for name in closure}
    return (
        [out for job in firsts.values() for out in job.outs],
        Counter(s for s in stage.values() if s in device),
        {s for s in stage.values() if s not in device} - {GUARD},  # the Snakefile checks params as it loads
    )


def test_each_device_stage_runs_on_slurm_like_dvc(cluster, tmp_path, request):
    started = time.monotonic()
    root = project_copy(tmp_path / "run")
    targets, expected, local_stages = device_closure(root)
    smk = run(["snakemake", "--profile", "profiles/slurm", *NO_ACCOUNTING, *targets], root, check=False)
    assert smk.returncode == 0, f"snakemake failed:\n{smk.stderr[-4000:]}\n{cluster.log_tail()}"
    ran_s = time.monotonic() - started

    # Slurm's records: every finished job (jobcomp/filetxt) and its allocation (scontrol, kept MinJobAge)
    finished = {r["JobId"]: r for r in cluster.records()}
    jobs = cluster.jobs()
    assert set(finished) == set(jobs), "jobcomp and scontrol disagree on the jobs run"
    assert all(r["JobState"] == "COMPLETED" for r in finished.values()), finished
    by_rule = Counter(job["rule"] for job in jobs.values())
    assert set(expected) == {"binding_train", "binding_aid_train", "assoc_basis", "assoc_train", "grounding_train",
                             "grounding_marking", "dino_features", "visual_train"}  # fmt: skip
    assert by_rule == expected, f"Slurm ran {dict(by_rule)}, expected the device stages {dict(expected)}"
    no_gpu = [f"{j['rule']} {j['JobId']}: JOB_GRES={j['JOB_GRES']}" for j in jobs.values() if j["JOB_GRES"] != "gpu:1"]
    assert not no_gpu, f"jobs without a GPU allocated: {no_gpu}"

    # every other stage they need ran here: Snakemake logs each local job as `localrule <name>:`
    local = set(re.findall(r"^localrule (\w+):", smk.stderr + smk.stdout, re.M)) - {"all"}
    assert local == local_stages and "binding_data" in local, local ^ local_stages

    assert "Nothing to be done" in run(["snakemake", "--cores", "1", "-n", *targets], root).stdout
    # the session's DVC run, asked for last: a cluster problem fails the test before it is computed.
    # What this run built equals the DVC run's files at the same paths, byte for byte.
    built = digest(root, reports=False)
    dvc_run = digest(request.getfixturevalue("tiny_run"), reports=False)
    assert any(p.startswith("data/visual/runs/") for p in built) and len(built) < len(dvc_run)
    assert built == {p: dvc_run.get(p) for p in built}
    print(f"\nSlurm bring-up {cluster.bring_up_s:.1f} s; device stages on Slurm {ran_s:.0f} s ({len(jobs)} jobs)")
