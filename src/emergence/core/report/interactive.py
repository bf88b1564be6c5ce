"""Interactive twins of the pages' curves (plotly): hover shows the series, step and value, and a
click on a legend entry hides that series. The PNGs stay for print; a page holding one of these
carries plotly.js inline, once, from the plotly wheel, so it still opens from disk with no network.

Output is byte-reproducible: the div id comes from the caller's name (no random uuid), the data are
plain lists.
"""

from __future__ import annotations

import re

import pandas as pd

MARK = 'class="plotly-graph-div"'  # what plotly's div carries: a page holding one needs plotly.js


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


def script() -> str:
    """plotly.js, inline (from the installed wheel: nothing is fetched)."""
    from plotly.offline import get_plotlyjs

    return f"<script>{get_plotlyjs()}</script>"
