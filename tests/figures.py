"""What a report figure shows, read from the figure object instead of its pixels.

Pages embed figures through `emergence.core.report.html.figure`; the `figures` fixture of
tests/conftest.py keeps each (figure, alt text) instead. `describe(fig)`
turns a figure into plain data a test can compare with what the page promises: its size, and per
panel the title, axis labels and scales, each line's label, data (floats to 6 decimals), colour and
style, each filled band's colour, alpha and edge width, and the legend's entries.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import to_hex
from matplotlib.figure import Figure


def _values(a) -> list:
    out = []
    for v in np.asarray(a, dtype=object).tolist():
        if isinstance(v, float):
            v = None if np.isnan(v) else round(v, 6)
        out.append(v)
    return out


def describe_axes(ax) -> dict:
    legend = ax.get_legend()
    return {
        "title": ax.get_title(),
        "xlabel": ax.get_xlabel(),
        "ylabel": ax.get_ylabel(),
        "xscale": ax.get_xscale(),
        "yscale": ax.get_yscale(),
        "lines": [
            {
                "label": line.get_label(),
                "x": _values(line.get_xdata()),
                "y": _values(line.get_ydata()),
                "colour": to_hex(line.get_color()),
                "width": line.get_linewidth(),
                "style": line.get_linestyle(),
                "marker": line.get_marker(),
            }
            for line in ax.get_lines()
        ],
        "bands": [
            {
                "colour": to_hex(band.get_facecolor()[0], keep_alpha=False),
                "alpha": band.get_alpha(),
                "edge_width": float(np.max(band.get_linewidth())) if len(band.get_linewidth()) else 0.0,
            }
            for band in ax.collections
        ],
        "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
    }


def describe(fig: Figure) -> dict:
    return {
        "size": tuple(float(v) for v in fig.get_size_inches()),
        "axes": [describe_axes(ax) for ax in fig.axes if ax.get_visible()],
    }
