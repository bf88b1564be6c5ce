"""Interactive curves: every series with its points, hover text naming series, step and value, an id
from the caller's name, the same bytes twice, and plotly.js in a page exactly when a plot is on it."""

from __future__ import annotations

import json
import re

import pandas as pd

from emergence.core.report import html as H
from emergence.core.report import interactive


def curve() -> pd.DataFrame:
    return pd.DataFrame(
        {"step": [10, 0, 5, 0, 5], "cls": ["b", "a", "a", "b", "b"], "value": [0.9, 0.1, 0.5, 0.2, 0.4]}
    )


def traces(fragment: str) -> list[dict]:
    """The data argument of the fragment's Plotly.newPlot call."""
    call = fragment[fragment.index("Plotly.newPlot(") :]
    start = call.index("[")
    data, _ = json.JSONDecoder().raw_decode(call[start:])
    return data


def test_one_series_per_class_sorted_by_step_with_hover_text():
    fragment = interactive.lines(curve(), "Stress accuracy, seed 1", "accuracy", "seed")
    assert 'id="plot-stress-accuracy-seed-1"' in fragment and interactive.MARK in fragment
    data = traces(fragment)
    assert [(t["name"], t["x"], t["y"]) for t in data] == [
        ("a", [0, 5], [0.1, 0.5]),
        ("b", [0, 5, 10], [0.2, 0.4, 0.9]),
    ]
    assert data[1]["hovertemplate"] == "seed b<br>step %{x}<br>accuracy %{y:.4g}<extra></extra>"
    assert "(click to hide)" in fragment  # the legend says how to hide a series


def test_the_same_curve_gives_the_same_bytes():
    assert interactive.lines(curve(), "x", "y", "z") == interactive.lines(curve(), "x", "y", "z")


def test_a_page_carries_plotly_once_and_only_with_a_plot():
    library = interactive.script()
    assert len(library) > 1_000_000 and "Plotly" in library
    plain = H.page("t", [("A", H.para("no plot"))])
    assert "<script" not in plain
    both = H.page(
        "t", [("A", H.curves(curve(), "accuracy", "seed", "one")), ("B", interactive.lines(curve(), "two", "y", "z"))]
    )
    assert both.count(library) == 1 and both.count(interactive.MARK) == 2
    assert re.search(r'<img alt="one" src="data:image/png;base64,', both)  # the PNG stays for print
