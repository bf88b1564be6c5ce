"""Write reports/plotly.min.js: plotly.js as the installed plotly wheel ships it, the one copy every
page with an interactive plot loads by a relative <script src> (each page carried it inline before,
~4.8 MB apiece). The only stage writing it, so rebuilding one page never rewrites what another loads."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import path_of
from emergence.core.io import atomic_path
from emergence.core.report.interactive import bundle


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    with atomic_path(path_of(params, "plotly_js")) as tmp:
        tmp.write_bytes(bundle())


if __name__ == "__main__":
    raise SystemExit(main())
