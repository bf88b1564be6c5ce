"""Every package the code imports is declared: the project's in pyproject.toml, the tests' and
benchmarks' in requirements.txt, each pinned there. A package that only arrives as another one's
dependency (ruamel.yaml came with DVC) disappears the day that one stops needing it."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from conftest import ROOT

# the project's packages, and the modules beside the tests and the benchmarks (a script may import its sibling;
# `python -m bench` imports them as bench.*, and reuses tests.conftest's project copy)
LOCAL = {"emergence", "stages", "bench", "tests"}
LOCAL |= {p.stem for folder in ("tests", "bench") for p in (ROOT / folder).rglob("*.py")}


def third_party_imports(*folders: str) -> dict[str, str]:
    """Top-level module -> first file importing it, over every .py file under `folders`."""
    found: dict[str, str] = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in LOCAL:
                        found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def normalise(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def distributions(module: str) -> set[str]:
    return {normalise(d) for d in packages_distributions().get(module, [])}


def requirement_names(lines: list[str]) -> set[str]:
    return {
        normalise(re.split(r"[=<>\[;~! ]", line.strip(), maxsplit=1)[0])
        for line in lines
        if line.strip() and not line.lstrip().startswith("#")
    }


def test_project_imports_are_project_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [req for reqs in project["optional-dependencies"].values() for req in reqs]  # .[interp]: imported lazily
    declared = requirement_names(project["dependencies"] + extras)
    missing = {
        module: where
        for module, where in third_party_imports("src", "stages").items()
        if not distributions(module) & declared
    }
    assert not missing, f"imported but not in pyproject.toml dependencies: {missing}"


def test_every_import_is_pinned_in_requirements():
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    pinned = {
        name
        for name in requirement_names(lines)
        if any(normalise(line.split("==")[0]) == name and "==" in line for line in lines)
    }
    missing = {
        module: where
        for module, where in third_party_imports("src", "stages", "tests", "bench").items()
        if not distributions(module) & pinned
    }
    assert not missing, f"imported but not pinned (==) in requirements.txt: {missing}"
