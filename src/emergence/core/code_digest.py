"""One code digest per stage instance: the code that can change its artifacts' bytes, and nothing else.

A stage's code is its script plus every project module it imports (core/pipeline.py `import_closure`),
less two kinds of code that cannot change an artifact's bytes:

- **plumbing** (`PLUMBING`): modules that parse arguments, guard params and paths, hold locks and
  record runs. They refuse a run or report on it, never compute what it writes; a test holds them to
  importing no numerical library.
- **messages**: docstrings, comments and the text of what is raised, printed or warned, and of
  argparse's and tqdm's help strings (core/code_facts.py `parse`, which keeps each
  file's result by its content). Rewording an error in core/io.py reruns nothing.

An architecture module is in an instance's code only when the instance can build that architecture:
its code reaches the model registry, and its params (or those of the stages upstream of it, whose
runs it loads) name the architecture under an `arch:` key, or its code names it in
`build_model("<arch>", ...)`. The registry imports an architecture on first use, so no import pulls
them all in.

The `params_check` stage writes each instance's digest (`${paths.code_digests}/<stage>[/<item>].txt`:
a line per params key the instance runs with, its value, then a line per file, the hash of its normalized
code) and depends on every code file and params.yaml; each other stage depends on its own digest file, and
dvc.yaml declares no params for it. DVC thus reruns params_check after any code or params edit, and then
exactly the stages whose digest changed. The Snakefile gives each rule the same digest as a param (Snakemake
reruns a job whose params changed). At the end of every stage run, `loaded_outside` holds the project
modules the process really loaded to its digest and the plumbing (a lazy import the static walk could
not see would otherwise go unhashed).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

from emergence.core.code_facts import facts
from emergence.core.declared import GUARD, IMPLICIT, lookup
from emergence.core.io import PipelineError
from emergence.core.pipeline import ARCH_PACKAGE, import_closure, known_archs, module_file, module_of, resolve_jobs

# module -> why it cannot change an artifact's bytes
PLUMBING = {
    "emergence.core.cli": "parses a stage's arguments, starts and ends it, holds its lock, prints its error",
    "emergence.core.declared": "refuses a read of a params section or path the stage does not declare",
    "emergence.core.reads": "records which files a stage read, in logs/",
    "emergence.core.stage_record": "writes the run record under logs/ (never a dep or an out)",
    "emergence.core.rules": "checks a params value against its declared rule: refuses, never converts",
    "emergence.core.experiment": "puts params.yaml back after a refused `dvc exp run -S`",
    "emergence.core.checkout": "holds one engine per checkout",
    "emergence.core.code_digest": "this file: which code a stage depends on",
    "emergence.core.code_facts": "parses each code file for this file, keeping what it found by content",
    "emergence.core.pipeline": "generates dvc.yaml and the Snakemake rules",
}
REGISTRY = Path("src/emergence/core/models/registry.py")
HEADER = (
    "# stage instance {instance}: the values of the params it runs with, then the sha256 of each file of its\n"
    "# code without docstrings, comments and messages (core/code_digest.py); DVC reruns it when this file changes\n"
)


# ---- which files are an instance's code -----------------------------------------------------------


def plumbing_files(root: Path) -> set[Path]:
    return {module_file(m, root).relative_to(root) for m in PLUMBING if module_file(m, root) is not None}


def params_archs(value: Any) -> set[str]:
    """Every string under an `arch:` key of a params value."""
    if isinstance(value, dict):
        return {a for k, v in value.items() for a in ({v} if k == "arch" and isinstance(v, str) else params_archs(v))}
    if isinstance(value, list):
        return {a for v in value for a in params_archs(v)}
    return set()


def instance_files(
    decl: dict[str, Any], params: dict[str, Any], root: Path, only: str | None = None
) -> dict[str, list[Path]]:
    """Stage instance (DVC's name) -> the files of its code, for every instance the params give, or for
    `only` (a stage checking itself at its exit walks its own imports and its producers', not all)."""
    closures = _Closures(root)
    jobs = {job.name: job for job in resolve_jobs(decl, params)}
    producer = {out: job.name for job in jobs.values() for out in job.outs if job.name != GUARD}  # the guard reads all

    def static(name: str) -> list[Path]:
        return closures.compute(module_of(decl["stages"][name.split("@")[0]]))

    archs: dict[str, set[str]] = {}

    def archs_of(name: str) -> set[str]:  # its params' and code's, and those of the stages it reads from
        if name not in archs:
            archs[name] = set()  # a cycle, which the engines refuse, ends here
            own = params_archs([_value(params, key) for key in jobs[name].params]) | closures.named_archs(static(name))
            archs[name] = own.union(*(archs_of(producer[i]) for i in jobs[name].inputs if i in producer))
        return archs[name]

    known = known_archs(root)
    files = {}
    for name in jobs if only is None else [only] if only in jobs else []:
        if name == GUARD:  # the guard itself: no stage reads it
            continue
        code = set(static(name))
        if REGISTRY in code:
            code = code.union(*(closures.compute(f"{ARCH_PACKAGE}.{a}") for a in sorted(archs_of(name) & known)))
        files[name] = sorted(code)
    return files


class _Closures:
    """Import closures and parsed files of one checkout, each computed once."""

    def __init__(self, root: Path):
        self.root = root
        self.plumbing = plumbing_files(root)
        self._closures: dict[str, list[Path]] = {}
        self._known: dict[str, tuple[Path | None, set[str]]] = {}  # module -> its file and imports

    def compute(self, module: str) -> list[Path]:
        """The files of `module`'s import closure that can change bytes: plumbing left out."""
        if module not in self._closures:
            closure = import_closure(module, self.root, self._known)
            self._closures[module] = [p for p in closure if p not in self.plumbing]
        return self._closures[module]

    def named_archs(self, files: list[Path]) -> set[str]:
        """Architectures the code builds by a literal name: `build_model("attn_only", ...)`."""
        return set().union(*(facts(self.root / p, self.root).archs for p in files))


def _value(params: dict[str, Any], key: str) -> Any:
    try:
        return lookup(params, key, key)
    except PipelineError:
        return None


# ---- the digest files ------------------------------------------------------------------------------


def digests(decl: dict[str, Any], params: dict[str, Any], root: Path) -> dict[str, str]:
    """Stage instance -> its digest file's text: a line per params key it runs with (base.threads, which every
    stage reads, and those it declares), its value as sorted JSON, then a line per code file."""
    keys = {job.name: [*IMPLICIT, *job.params] for job in resolve_jobs(decl, params)}

    def text(instance: str, files: list[Path]) -> str:
        values = [f"# {k}: {json.dumps(_value(params, k), sort_keys=True, default=str)}\n" for k in keys[instance]]
        code = [f"{facts(root / f, root).digest}  {f}\n" for f in files]
        return HEADER.format(instance=instance) + "".join(values) + "".join(code)

    return {instance: text(instance, files) for instance, files in instance_files(decl, params, root).items()}


def listed_files(text: str) -> list[str]:
    """The files a digest file lists."""
    return [line.split("  ", 1)[1] for line in text.splitlines() if line and not line.startswith("#")]


def loaded_outside(modules: list[ModuleType], listed: list[str], root: Path) -> list[str]:
    """The project files among `modules` that are neither in the instance's digest (`listed`) nor plumbing."""
    allowed = set(listed) | {str(p) for p in plumbing_files(root)}
    loaded = []
    for module in modules:
        file = getattr(module, "__file__", None)
        if not file:
            continue
        try:
            rel = Path(file).resolve().relative_to(root.resolve())
        except ValueError:
            continue
        if rel.parts[0] in ("src", "stages") and str(rel) not in allowed:
            loaded.append(str(rel))
    return sorted(loaded)
