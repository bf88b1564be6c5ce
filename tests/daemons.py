"""Stopping the daemons the pipeline tests start (sshd, munged, slurmctld, slurmd)."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited after grace_s seconds; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
