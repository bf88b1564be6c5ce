"""Building blocks for self-contained, offline HTML report pages.

Every function returns an HTML fragment (a str). Text is always escaped here,
so callers pass plain strings; figures are embedded as base64 PNG data URIs. A
page with interactive curves loads plotly.js from the one copy beside it
(interactive.py): its only file besides itself, so it opens from disk with its folder.
"""

from __future__ import annotations

import base64
import html
import io
import math
from typing import TYPE_CHECKING

import matplotlib as mpl
import pandas as pd
import yaml

from emergence.core.report import interactive

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CSS = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .3rem; }
h2 { margin-top: 2.5rem; border-bottom: 1px solid #bbb; }
table { border-collapse: collapse; margin: .8rem 0; font-size: .9rem; }
th, td { border: 1px solid #ccc; padding: .25rem .6rem; text-align: right; }
th { background: #f0f0f0; }
td.text, th.text { text-align: left; }
caption { caption-side: top; text-align: left; font-style: italic; padding: .2rem 0; }
pre { background: #f6f6f6; padding: .6rem; overflow-x: auto; font-size: .85rem; }
img { max-width: 100%; }
nav ul { columns: 2; }
.ok { color: #1a7f37; font-weight: bold; }
.bad { color: #c0392b; font-weight: bold; }
.note { color: #555; font-style: italic; }
.examples { display: grid; grid-template-columns: repeat(auto-fill, minmax(14rem, 1fr)); gap: .8rem; }
.examples figure { margin: 0; border: 1px solid #ddd; padding: .4rem; }
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def para(text: str, cls: str | None = None) -> str:
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<p{attr}>{esc(text)}</p>"


def opt_in(what: str, key: str) -> str:
    """The note of an analysis the params leave out: the default does, to finish in under an hour on 2 cores."""
    return para(
        f"{what}: not run ({key} names none). The default leaves it out to finish in under an hour on 2 "
        "cores; `make repro PROFILE=full` (profiles/full.yaml) runs it.",
        "note",
    )


def pre(text: str) -> str:
    return f"<pre>{esc(text)}</pre>"


def span(text: str, cls: str) -> str:
    return f'<span class="{esc(cls)}">{esc(text)}</span>'


def anchor(title: str) -> str:
    """Stable id for a section heading: lowercase words joined by '-'."""
    return "-".join("".join(c if c.isalnum() else " " for c in title.lower()).split())


def _cell(value: object, float_format: str) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "&ndash;"
    if isinstance(value, float):
        return esc(float_format.format(value))
    return esc(value)


def table(df: pd.DataFrame, caption: str | None = None, float_format: str = "{:.3f}") -> str:
    """An escaped <table> of `df`'s columns (the index is dropped; reset it first to keep it).

    Numeric columns are right-aligned, the rest left-aligned; NaN shows as a dash.
    """
    text_cols = [not pd.api.types.is_numeric_dtype(df[c]) for c in df.columns]
    rows = [
        [_cell(v.item() if hasattr(v, "item") else v, float_format) for v in rec] for rec in df.itertuples(index=False)
    ]
    return fragment_table([esc(c) for c in df.columns], rows, text_cols, caption)


def fragment_table(head: list[str], rows: list[list[str]], text_cols: list[bool], caption: str | None = None) -> str:
    """A <table> of HTML fragments (already escaped: links, spans); text columns left-aligned."""
    th = "".join(f'<th class="text">{h}</th>' if t else f"<th>{h}</th>" for h, t in zip(head, text_cols))
    body = [
        "<tr>" + "".join(f'<td class="text">{c}</td>' if t else f"<td>{c}</td>" for c, t in zip(r, text_cols)) + "</tr>"
        for r in rows
    ]
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{th}</tr></thead><tbody>" + "".join(body) + "</tbody></table>"


def figure(fig: Figure, alt: str, dpi: int = 100) -> str:
    """Render `fig` with Agg to PNG and embed it; PNG metadata is dropped so bytes are reproducible."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # see plots.new_figure: imported when drawn

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    with mpl.rc_context():
        mpl.rcdefaults()  # draw-time settings (hinting, antialiasing) must not come from a user's rc
        fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def curves(df: pd.DataFrame, ylabel: str, legend_title: str, alt: str) -> str:
    """A curve figure (df: step, cls, value) twice: the PNG for print, then its interactive twin."""
    from emergence.core.report import plots

    png = figure(plots.lines_by_class(df, ylabel, legend_title), alt)
    return png + "\n" + interactive.lines(df, alt, ylabel, legend_title)


def link(text: str, href: str) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>'


# Marks what differs between two runs of the same inputs (machine, engine, wall times): the tests'
# artifact digest blanks everything between the two comments (tests/artifacts.py).
RUN_SPECIFIC = ("<!-- run-specific -->", "<!-- /run-specific -->")


def run_specific(fragment: str) -> str:
    return f"{RUN_SPECIFIC[0]}\n{fragment}\n{RUN_SPECIFIC[1]}"


def provenance_block(provenance: dict) -> str:
    """Git revision, seeds, input hashes and the full params, as recorded by the stage."""
    hashes = pd.DataFrame(sorted(provenance["data_hashes"].items()), columns=["file", "sha256"])
    params = yaml.safe_dump(provenance["params"], sort_keys=True, default_flow_style=False)
    return "\n".join(
        [
            para(f"Git revision: {provenance['git_revision']}"),
            para("Seeds: " + ", ".join(str(s) for s in provenance["seeds"])),
            table(hashes, caption="Input files (sha256)"),
            "<details><summary>params.yaml</summary>" + pre(params) + "</details>",
        ]
    )


def page(title: str, sections: list[tuple[str, str]], intro: str = "", plotly_src: str = interactive.BUNDLE) -> str:
    """A complete HTML document: title, optional intro, a table of contents, then each
    (heading, body fragment) section with a linkable id. A page holding an interactive plot loads
    plotly.js from `plotly_src` (relative to the page: interactive.bundle_src), once."""
    nav = "<nav><ul>" + "".join(f'<li><a href="#{anchor(t)}">{esc(t)}</a></li>' for t, _ in sections) + "</ul></nav>"
    body = [f'<section id="{anchor(t)}">\n<h2>{esc(t)}</h2>\n{b}\n</section>' for t, b in sections]
    plotly = interactive.script(plotly_src) if any(interactive.MARK in b for _, b in sections) else ""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{esc(title)}</title>",
            f"<style>{CSS}</style>{plotly}</head><body>",
            f"<h1>{esc(title)}</h1>",
            para(intro) if intro else "",
            nav,
            *body,
            "</body></html>",
            "",
        ]
    )
