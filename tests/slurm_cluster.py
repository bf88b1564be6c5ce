"""A one-node Slurm cluster under a temporary folder, for tests: munge, slurmctld, slurmd, two fake GPUs.

    with slurm_cluster(tmp_path / "slurm") as cluster:
        ...  # sbatch / squeue / the Snakemake executor work; cluster.records() reads finished jobs

Every daemon runs in the foreground as a child of this process (its PID is ours to stop); they are
stopped, and /etc/slurm/slurm.conf put back as it was, when the block ends, even on failure.
Job steps read /etc/slurm/slurm.conf whatever SLURM_CONF says, hence the symlink there.
No accounting daemon: `sacct` does not work; jobcomp/filetxt writes one line per finished job.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from daemons import stop_process

ETC_CONF = Path("/etc/slurm/slurm.conf")
N_GPUS = 2
PARTITION = "gpu"
# binary -> the Debian package that ships it
PACKAGES = {
    "munged": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "squeue": "slurm-client",
    "scontrol": "slurm-client",
}


class ClusterError(RuntimeError):
    """The cluster could not be brought up: one line saying why."""


def missing_packages() -> list[str]:
    """Debian packages whose binaries are not on PATH (or in /usr/sbin)."""
    path = f"{os.environ.get('PATH', '')}{os.pathsep}/usr/sbin{os.pathsep}/sbin"
    return sorted({pkg for binary, pkg in PACKAGES.items() if shutil.which(binary, path=path) is None})


def slurm_conf(root: Path, host: str, memory_mb: int, cpus: int) -> str:
    return "\n".join(
        [
            "ClusterName=test",
            f"SlurmctldHost={host}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={root}/munge/munge.socket",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmdPidFile={root}/slurmd.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log",
            f"SlurmdLogFile={root}/log/slurmd.log",
            "SlurmctldPort=6917",  # not the default ports: a system Slurm may hold those
            "SlurmdPort=6918",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={root}/log/jobcomp.txt",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "MinJobAge=3600",  # finished jobs stay in squeue / scontrol (the allocation record) for the test
            "ReturnToService=2",
            "GresTypes=gpu",
            f"NodeName={host} CPUs={cpus} RealMemory={memory_mb} Gres=gpu:{N_GPUS} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@dataclass
class Cluster:
    root: Path
    conf: Path
    env: dict[str, str]
    bring_up_s: float = 0.0
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def jobcomp(self) -> Path:
        return self.root / "log" / "jobcomp.txt"

    def records(self) -> list[dict[str, str]]:
        """Finished jobs as jobcomp/filetxt writes them: one `Key=value ...` line per job."""
        if not self.jobcomp.exists():
            return []
        return [
            dict(item.split("=", 1) for item in line.split() if "=" in item)
            for line in self.jobcomp.read_text().splitlines()
            if line.strip()
        ]

    def jobs(self) -> dict[str, dict[str, str]]:
        """Every job slurmctld still holds, by id, with its allocation (`JOB_GRES=gpu:1`) and `rule`:
        the Snakemake rule named by the executor's --comment (rule_<name>[_wildcards_<values>])."""
        out = subprocess.run(["scontrol", "show", "job", "-o", "-d"], env=self.env, capture_output=True, text=True)
        if out.returncode != 0 and "No jobs" not in out.stderr + out.stdout:
            raise ClusterError(f"scontrol show job failed: {out.stderr.strip()}")
        jobs = {}
        for line in out.stdout.splitlines():
            job = dict(re.findall(r"(\S+?)=(\S*)", line))
            if "JobId" in job:
                rule = re.fullmatch(r"rule_(\w+?)(_wildcards_.*)?", job.get("Comment", ""))
                jobs[job["JobId"]] = {**job, "rule": rule.group(1) if rule else None}
        return jobs

    def log_tail(self, n: int = 2000) -> str:
        logs = sorted((self.root / "log").glob("*.log"))
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-n:]}" for p in logs)


def start(cluster: Cluster, name: str, cmd: list[str]) -> None:
    """A daemon in the foreground (-D / --foreground), our child: its PID is the one we stop."""
    with open(cluster.root / "log" / f"{name}.out", "wb") as log:  # the child keeps its own descriptor
        cluster.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=cluster.env)


def stop(cluster: Cluster) -> None:
    """Cancel this cluster's jobs, then stop the daemons we started, last started first."""
    if "slurmctld" in cluster.procs:
        try:
            subprocess.run(["scancel", "--full", "--user=root"], env=cluster.env, capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            pass  # the daemons are stopped below all the same
    for proc in reversed(list(cluster.procs.values())):
        stop_process(proc, grace_s=20)


def wait_until(cluster: Cluster, what: str, ready, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise ClusterError(f"{name} exited ({proc.returncode}) while waiting for {what}:\n{cluster.log_tail()}")
        if ready():
            return
        time.sleep(0.5)
    raise ClusterError(f"no {what} after {timeout_s:.0f} s:\n{cluster.log_tail()}")


def node_idle(cluster: Cluster) -> bool:
    out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=cluster.env, capture_output=True, text=True)
    return out.returncode == 0 and out.stdout.split() == ["idle"]


@contextmanager
def linked_conf(conf: Path) -> Iterator[None]:
    """/etc/slurm/slurm.conf -> conf for the block; whatever was there before is put back."""
    ETC_CONF.parent.mkdir(parents=True, exist_ok=True)
    saved = ETC_CONF.with_name("slurm.conf.before-test")
    had = ETC_CONF.is_symlink() or ETC_CONF.exists()
    if had:
        os.replace(ETC_CONF, saved)
    ETC_CONF.symlink_to(conf)
    try:
        yield
    finally:
        ETC_CONF.unlink()
        if had:
            os.replace(saved, ETC_CONF)


@contextmanager
def slurm_cluster(root: Path, timeout_s: float = 60) -> Iterator[Cluster]:
    """Bring the cluster up under `root` (fresh), yield it, stop it. Raises ClusterError when it cannot."""
    missing = missing_packages()
    if missing:
        raise ClusterError(f"missing Debian package(s) {', '.join(missing)}: apt-get install {' '.join(missing)}")
    if os.geteuid() != 0:
        raise ClusterError("a test cluster needs root (slurmd runs jobs as root, /etc/slurm/slurm.conf is linked)")
    t0 = time.monotonic()
    for sub in ("munge", "state", "spool", "log", "dev"):
        (root / sub).mkdir(parents=True, mode=0o700)
    host = socket.gethostname().split(".")[0]
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    # fake GPUs: gres.conf must name device files; 195 is the NVIDIA character-device major number
    gpus = [root / "dev" / f"nvidia{i}" for i in range(N_GPUS)]
    for i, dev in enumerate(gpus):
        subprocess.run(["mknod", str(dev), "c", "195", str(i)], check=True)
    conf = root / "slurm.conf"
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 * 9 // 10
    conf.write_text(slurm_conf(root, host, memory_mb, os.cpu_count() or 1))
    (root / "gres.conf").write_text(f"Name=gpu File={root}/dev/nvidia[0-{N_GPUS - 1}]\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = Cluster(root, conf, env)
    with linked_conf(conf):
        try:
            m = root / "munge"
            start(
                cluster,
                "munged",
                [
                    "munged",
                    "--foreground",
                    "--force",
                    f"--socket={m}/munge.socket",
                    f"--key-file={key}",
                    f"--pid-file={m}/munged.pid",
                    f"--seed-file={m}/munged.seed",
                    f"--log-file={root}/log/munged.log",
                ],
            )
            wait_until(cluster, "munge socket", (m / "munge.socket").exists, timeout_s)
            start(cluster, "slurmctld", ["slurmctld", "-D", "-i", "-f", str(conf)])
            start(cluster, "slurmd", ["slurmd", "-D", "-f", str(conf)])
            wait_until(cluster, "idle node", lambda: node_idle(cluster), timeout_s)
            cluster.bring_up_s = time.monotonic() - t0
            yield cluster
        finally:
            stop(cluster)
