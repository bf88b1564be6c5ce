"""The project index page: one link per study page that has been built."""

from __future__ import annotations

from emergence.core.report import html as H


def index_page(pages: list[tuple[str, str, str]]) -> str:
    """pages: (title, href relative to the index, one-line summary), in display order.

    The caller passes only pages that exist, so every link resolves offline.
    """
    body = H.link_list(pages) if pages else H.para("No study pages have been built yet.", "note")
    return H.page(
        "Emergence: study reports",
        [("Studies", body)],
        intro="How grounding, associations and variable binding emerge in small language models.",
    )
