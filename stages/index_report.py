"""Write reports/index.html linking every study page that has been built."""

from __future__ import annotations

import os

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import path_of
from emergence.core.io import write_text
from emergence.core.report.index import index_page

# (paths key of the study page, title, one-line summary); later studies append here.
STUDY_PAGES = [
    (
        "binding_report",
        "Variable binding",
        "How a GPT-2-style model learns to follow chains of assignments (Wu, Geiger & Millière 2025).",
    ),
    (
        "assoc_report",
        "Token associations",
        "Early weights of an attention-only model equal closed forms of corpus statistics (Im et al. 2026).",
    ),
    (
        "grounding_report",
        "Symbol grounding (child-directed speech)",
        "Does seeing an object make its word less surprising? Transformer, Mamba-2 and LSTM (Wu et al. 2025).",
    ),
    (
        "visual_report",
        "Symbol grounding (visual dialogue)",
        "The same question with a caption or the image itself (DINOv2 features) as the environment.",
    ),
]


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    index = path_of(params, "index_report")
    pages = [
        (title, os.path.relpath(path_of(params, key), index.parent), summary)
        for key, title, summary in STUDY_PAGES
        if path_of(params, key).exists()
    ]
    write_text(index_page(pages), index)


if __name__ == "__main__":
    raise SystemExit(main())
