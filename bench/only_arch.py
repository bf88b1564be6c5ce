"""Build an sdist's CUDA extension for one card only (bench/gpu_node.sh): its setup.py appends a
`-gencode arch=compute_XX,code=sm_XX` pair per card its CUDA knows (nine under CUDA 13: many minutes
of nvcc); every pair but this card's becomes `pass`.

    python -m bench.only_arch SETUP_PY ARCH     # ARCH: "90" for sm_90
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PAIR = re.compile(r'cc_flag\.append\("-gencode"\)\s*\n\s*cc_flag\.append\("arch=compute_(\d+),code=sm_\d+"\)')


def only_arch(text: str, arch: str) -> str:
    """`text` (a setup.py) with every -gencode pair but `arch`'s replaced by `pass`; an error naming the
    pairs it has when `arch` is not among them."""
    found = PAIR.findall(text)
    if arch not in found:
        raise ValueError(f"no -gencode pair for sm_{arch} (it has {', '.join(found) or 'none'})")
    return PAIR.sub(lambda m: m.group(0) if m.group(1) == arch else "pass", text)


def main(argv: list[str] | None = None) -> None:
    path, arch = argv or sys.argv[1:]
    setup = Path(path)
    try:
        text = only_arch(setup.read_text(), arch)  # read whole before writing: "w" truncates first
    except (OSError, ValueError) as e:
        raise SystemExit(f"{setup}: {e}") from None
    setup.write_text(text)


if __name__ == "__main__":
    main()
