"""Interactive twins of the pages' curves (plotly): hover shows the series, step and value, and a
click on a legend entry hides that series. The PNGs stay for print. plotly.js (~4.8 MB) is not in
the pages: the `plotly_js` stage writes it once per reports/ folder from the installed plotly wheel
(`bundle`), and a page holding a plot loads it by a relative <script src> (`bundle_src`), so the pages
still open from disk with no network.

Output is byte-reproducible: the div id comes from the caller's name (no random uuid), the data are
plain lists, and the bundle is the wheel's file as shipped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from emergence.core.io import PipelineError

MARK = 'class="plotly-graph-div"'  # what plotly's div carries: a page holding one needs plotly.js
BUNDLE = "plotly.min.js"  # the bundle's name beside the pages (paths.plotly_js)


def lines(df: pd.DataFrame, name: str, ylabel: str, legend_title: str, x: str = "step") -> str:
    """One line per `cls` over `x` (df: x, cls, value), as an interactive plot; `name` makes its id."""
    import plotly.graph_objects as go
    import plotly.io as pio

    fig = go.Figure()
    for cls, d in df.groupby("cls", sort=True):
        d = d.sort_values(x)
        fig.add_scatter(
            x=d[x].tolist(),
            y=d["value"].astype(float).tolist(),
            name=str(cls),
            mode="lines+markers",
            hovertemplate=f"{legend_title} {cls}<br>{x} %{{x}}<br>{ylabel} %{{y:.4g}}<extra></extra>",
        )
    fig.update_layout(
        template="plotly_white",
        height=360,
        margin=dict(l=60, r=20, t=30, b=50),
        xaxis_title=x,
        yaxis_title=ylabel,
        legend_title_text=f"{legend_title} (click to hide)",
    )
    div_id = "plot-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return pio.to_html(
        fig, full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False, "responsive": True}
    )


def bundle() -> bytes:
    """plotly.js as the installed wheel ships it (nothing is fetched): the same wheel, the same bytes."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs().encode("utf-8")


def bundle_src(page: Path, bundle_file: Path) -> str:
    """The bundle's address relative to `page`'s folder, as a URL path, so it resolves from disk
    (file://) and from any server alike. The bundle must be there: a page without it draws no plot."""
    if not bundle_file.is_file():
        raise PipelineError(
            f"paths.plotly_js: {bundle_file} is missing, and {page.name}'s plots load it "
            "(run the plotly_js stage first: python -m stages.plotly_js, or dvc repro)"
        )
    return quote(Path(os.path.relpath(bundle_file, page.parent)).as_posix())


def script(src: str) -> str:
    """The tag that loads the bundle (`src`: a URL path, already quoted), once per page."""
    return f'<script src="{src}"></script>'
