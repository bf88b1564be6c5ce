"""Many `python -m stages.X ...` commands run from one interpreter start.

Starting an interpreter and importing torch costs seconds, so the commands share one: it imports the
stages' libraries once, then per command forks a child that runs the module as __main__ exactly as
`python -m` does (argv, working directory, stdout and stderr, exit status, interpreter shutdown
included). Used where a test runs many stage starts, each to its first lines (a refusal, an error).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

RUNNER = r"""
import gc, json, os, runpy, sys
import emergence.check, emergence.core.train, emergence.studies.binding.ablation, emergence.studies.binding.patching
gc.freeze()  # children's shutdown then leaves the shared pages alone: ~2x faster
for cwd, log, module, *args in json.load(open(sys.argv[1])):
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.chdir(cwd)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            os.dup2(os.open(f"{log}.{name}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        sys.exit(0)
    with open(f"{log}.code", "w") as f:
        f.write(str(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])))
"""


def run_modules(
    commands: list[tuple[Path, list[str]]], env: dict, timeout: float = 600
) -> list[subprocess.CompletedProcess]:
    """Each (working directory, ["stages.X", *args]) run as `python -m stages.X *args` there, in order;
    their outcomes as `subprocess.run(..., text=True)` gives them (stderr decoded whole: progress bars'
    carriage returns kept)."""
    with tempfile.TemporaryDirectory() as tmp:
        logs = [Path(tmp) / str(i) for i in range(len(commands))]
        jobs = [[str(cwd), str(log), *argv] for (cwd, argv), log in zip(commands, logs)]
        listed = Path(tmp) / "jobs.json"
        listed.write_text(json.dumps(jobs))
        subprocess.run([sys.executable, "-c", RUNNER, str(listed)], env=env, check=True, timeout=timeout)
        return [
            subprocess.CompletedProcess(
                [sys.executable, "-m", *argv],
                int(log.with_suffix(".code").read_text()),
                log.with_suffix(".stdout").read_bytes().decode(),
                log.with_suffix(".stderr").read_bytes().decode(),
            )
            for (_, argv), log in zip(commands, logs)
        ]
