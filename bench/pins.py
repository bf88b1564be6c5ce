"""The project's pins (constraints.txt) on a GPU machine: the pure-Python wheels to carry there, and
the record of each package's version on the machine beside its pin.

    python -m bench.pins wheels .gpu-wheels     # here: download the pinned pure-Python wheels (make gpu-wheels)
    bench/with_pins.sh .gpu-wheels CMD...       # there: install them ahead of the machine's own, run CMD

A GPU machine brings its own torch (a CUDA build) and whatever else its image holds, at its own
versions (transformers 5.17 where this project pins 5.23). Pure-Python wheels install anywhere, so
the check carries every pinned one it imports; compiled ones (numpy, pandas, pyarrow, tokenizers) stay
the machine's, and the record names each that differs from its pin.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import platform
import re
import subprocess
import sys
from pathlib import Path

CONSTRAINTS = Path(__file__).resolve().parent.parent / "constraints.txt"
# Unpinned: the .[gpu] extra, built on the machine (docs/gpu.md); recorded, never compared.
EXTRAS = ("triton", "mamba_ssm", "causal_conv1d")
# What the check imports only once a measurement runs: imported before the closure is read.
CHECK_MODULES = (
    "bench.gpu",
    "bench.paper_binding",
    "transformers.models.gpt2.modeling_gpt2",
    "transformers.models.mamba2.modeling_mamba2",
)
TORCH_BUILD = "the machine's CUDA build of torch (the pin is the CPU wheel)"
CARRY_MIB = 56  # of the 64 MiB a GPU call carries: the rest is the working tree (~4 MiB)
FIRST = ("transformers",)  # kept first when the carry limit drops wheels


def canonical(name: str) -> str:
    """A distribution's name as PyPI compares them: ruamel.yaml, ruamel_yaml and Ruamel-YAML are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path = CONSTRAINTS) -> dict[str, str]:
    """{canonical name: version} of every `name==version` line."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        # an environment marker (`; python_version == "3.12"`) says where the pin applies, not its version
        name, sep, version = line.split("#")[0].split(";")[0].strip().partition("==")
        if sep:
            pins[canonical(name.strip())] = version.strip()  # pip reads `foo == 1.0` as a pin too
    return pins


def loaded_distributions() -> set[str]:
    """Canonical names of the installed distributions whose modules this process has imported."""
    owners = md.packages_distributions()
    return {canonical(d) for m in list(sys.modules) for d in owners.get(m.partition(".")[0], ())}


def installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def compare(machine: dict[str, str | None], pins: dict[str, str]) -> dict:
    """Each package's version on the machine (None: absent) beside its pin, and every difference;
    torch's is expected (the machine's CUDA build) and says so."""
    packages = {name: {"machine": machine[name], "pinned": pins.get(name)} for name in sorted(machine)}
    differences = [
        {"package": name, **v, "expected": TORCH_BUILD if name == "torch" else None}
        for name, v in packages.items()
        if v["pinned"] is not None and v["machine"] != v["pinned"]
    ]
    return {"packages": packages, "differences": differences}


def unpinned(versions: dict, packages: tuple[str, ...]) -> list[str]:
    """'name machine (pinned X)' for each of `packages` that differs from its pin, unexpectedly."""
    return [
        f"{d['package']} {d['machine'] or 'absent'} (pinned {d['pinned']})"
        for d in versions["differences"]
        if d["package"] in packages and d["expected"] is None
    ]


def _importable(name: str) -> str:
    try:
        return __import__(name).__version__
    except Exception as e:  # noqa: BLE001 - not importable is the answer, whatever the reason
        return f"not importable ({type(e).__name__})"


def version_record() -> dict:
    """The versions of this run: the pinned packages it imported (and torch) against constraints.txt,
    then the unpinned extras as the machine has them."""
    pins = read_pins()
    names = (loaded_distributions() & set(pins)) | {"torch"}
    record = compare({name: installed(name) for name in names}, pins)
    return {"python": platform.python_version(), **record, "extras": {e: _importable(e) for e in EXTRAS}}


def pure_python(name: str) -> bool:
    """Installed here from a wheel tagged for any platform (py3-none-any): it installs on the GPU machine."""
    wheel = md.distribution(name).read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    return bool(tags) and all(tag.endswith("-none-any") for tag in tags)


def to_carry(pins: dict[str, str]) -> list[str]:
    """The pinned pure-Python distributions the check imports, transformers first. torch's own
    requirements (sympy, jinja2, filelock, ...) stay the machine's: its torch was built against them."""
    for module in CHECK_MODULES:
        importlib.import_module(module)
    torch_needs = {canonical(re.match(r"[\w.-]+", r)[0]) for r in md.requires("torch") or []}
    names = sorted((loaded_distributions() & set(pins)) - torch_needs - {"torch"})
    return sorted((n for n in names if pure_python(n)), key=lambda n: n not in FIRST)


def download(names: list[str], pins: dict[str, str], folder: Path, python: str) -> list[str]:
    """Fetch each wheel at its pin into `folder` (emptied first), within CARRY_MIB; returns those left out."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.whl"):
        old.unlink()
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    subprocess.run([*pip, "--python-version", python, "-d", str(folder), *(f"{n}=={pins[n]}" for n in names)],
                   check=True)  # fmt: skip
    wheels = {canonical(p.name.split("-")[0]): p for p in folder.glob("*.whl")}
    left, total = [], 0
    for name in names:  # in priority order: the last ones go when the limit is reached
        size = wheels[name].stat().st_size
        if total + size > CARRY_MIB * 2**20:
            wheels[name].unlink()
            left.append(name)
        else:
            total += size
    return left


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("wheels", help="download the pinned pure-Python wheels the check imports")
    w.add_argument("folder", type=Path)
    w.add_argument("--python", default="3.12", help="the GPU machine's Python (its image: 3.12)")
    a = ap.parse_args(argv)
    pins = read_pins()
    names = to_carry(pins)
    left = download(names, pins, a.folder, a.python)
    mib = sum(p.stat().st_size for p in a.folder.glob("*.whl")) / 2**20
    print(f"{a.folder}: {len(names) - len(left)} wheels, {mib:.1f} MiB: {', '.join(n for n in names if n not in left)}")
    if left:
        print(f"left out (over {CARRY_MIB} MiB): {', '.join(left)}")


if __name__ == "__main__":
    main()
