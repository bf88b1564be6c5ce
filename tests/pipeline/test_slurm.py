"""The tiny profile through the Slurm executor on a real one-node cluster (tests/slurm_cluster.py).

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

from emergence.core.pipeline import resolve_jobs

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


def expected_slurm_jobs(root) -> Counter:
    """Instances per stage that declares base.device, read straight from dvc.yaml and params.yaml."""
    dvc = yaml.safe_load((root / "dvc.yaml").read_text())
    params = yaml.safe_load((root / "params.yaml").read_text())
    device = {name for name, stage in dvc["stages"].items() if "base.device" in stage.get("params", [])}
    training = {
        name for name, stage in dvc["stages"].items() if re.match(r"python -m stages\.\w+\.train", stage["cmd"])
    }
    assert training and training <= device, f"training stages not computing on the device: {training - device}"
    return Counter(job.name.split("@")[0] for job in resolve_jobs(dvc, params) if job.name.split("@")[0] in device)


def test_tiny_profile_runs_on_slurm_like_dvc(cluster, tmp_path, request):
    started = time.monotonic()
    root = project_copy(tmp_path / "run")
    smk = run(["snakemake", "--profile", "profiles/slurm", *NO_ACCOUNTING], root, check=False)
    assert smk.returncode == 0, f"snakemake failed:\n{smk.stderr[-4000:]}\n{cluster.log_tail()}"
    ran_s = time.monotonic() - started

    # Slurm's records: every finished job (jobcomp/filetxt) and its allocation (scontrol, kept MinJobAge)
    finished = {r["JobId"]: r for r in cluster.records()}
    jobs = cluster.jobs()
    assert set(finished) == set(jobs), "jobcomp and scontrol disagree on the jobs run"
    assert all(r["JobState"] == "COMPLETED" for r in finished.values()), finished
    by_rule = Counter(job["rule"] for job in jobs.values())
    expected = expected_slurm_jobs(root)
    assert by_rule == expected, f"Slurm ran {dict(by_rule)}, expected the device stages {dict(expected)}"
    no_gpu = [f"{j['rule']} {j['JobId']}: JOB_GRES={j['JOB_GRES']}" for j in jobs.values() if j["JOB_GRES"] != "gpu:1"]
    assert not no_gpu, f"jobs without a GPU allocated: {no_gpu}"

    # every other stage ran here: Snakemake logs each local job as `localrule <name>:`
    dvc = yaml.safe_load((root / "dvc.yaml").read_text())
    local = set(re.findall(r"^localrule (\w+):", smk.stderr + smk.stdout, re.M)) - {"all"}
    assert local == set(dvc["stages"]) - set(expected), local ^ (set(dvc["stages"]) - set(expected))

    assert "Nothing to be done" in run(["snakemake", "--cores", "1", "-n"], root).stdout
    # the session's DVC run, asked for last: a cluster problem fails the test before it is computed.
    # The reports' git revision line names the tree each copy was taken from (two copies of a
    # checkout edited in between differ there, and only there), not anything an engine computed.
    assert digest(root, ignore_revision=True) == digest(request.getfixturevalue("tiny_run"), ignore_revision=True)
    print(f"\nSlurm bring-up {cluster.bring_up_s:.1f} s; tiny profile on Slurm {ran_s:.0f} s ({len(jobs)} jobs)")
