"""Interactive curves: every series with its points, hover text naming series, step and value, an id
from the caller's name, the same bytes twice; plotly.js written once per reports/ folder (the wheel's
file as shipped), and a page loading it by a relative address exactly when a plot is on it."""

from __future__ import annotations

import importlib.resources
import json
import re
import shutil
from pathlib import Path
from urllib.parse import urljoin

import pandas as pd
from refusals import refuses

from emergence.core.config import read_params
from emergence.core.report import html as H
from emergence.core.report import interactive
from stages import plotly_js

ROOT = Path(__file__).parents[2]
WHEEL = importlib.resources.files("plotly") / "package_data" / "plotly.min.js"  # the file plotly ships


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


def two_plots(plotly_src: str = interactive.BUNDLE) -> str:
    sections = [("A", H.curves(curve(), "accuracy", "seed", "one")), ("B", interactive.lines(curve(), "two", "y", "z"))]
    return H.page("t", sections, plotly_src=plotly_src)


def test_a_page_loads_plotly_once_by_address_and_only_with_a_plot():
    plain = H.page("t", [("A", H.para("no plot"))])
    assert "<script" not in plain
    both = two_plots("../shared/plotly.min.js")
    assert re.findall(r"<script [^>]*\bsrc=[^>]*>", both) == ['<script src="../shared/plotly.min.js">']
    assert both.index("<script src=") < both.index("</head>")
    assert both.count(interactive.MARK) == 2
    assert re.search(r'<img alt="one" src="data:image/png;base64,', both)  # the PNG stays for print


def test_the_bundle_is_the_wheels_plotly_min_js_byte_for_byte():
    shipped = WHEEL.read_bytes()
    assert len(shipped) > 3_000_000 and b"plotly.js" in shipped[:200]  # the minified library and its banner
    assert interactive.bundle() == shipped


def workspace(tmp_path: Path, monkeypatch) -> Path:
    """A folder holding only params.yaml (the shipped paths), the working directory."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_stage_writes_the_bundle_once_and_a_written_page_loads_it_instead_of_carrying_it(tmp_path, monkeypatch):
    root = workspace(tmp_path, monkeypatch)
    paths = read_params(root / "params.yaml")["paths"]
    assert plotly_js.main([]) == 0
    bundle = root / paths["plotly_js"]
    assert bundle.read_bytes() == WHEEL.read_bytes()
    for key in ("binding_report", "assoc_report", "grounding_report", "visual_report"):  # one folder, one copy
        assert (root / paths[key]).parent == bundle.parent, key
    page_path = root / paths["binding_report"]
    page_path.write_text(two_plots(interactive.bundle_src(page_path, bundle)))
    written = page_path.read_text()
    assert '<script src="plotly.min.js"></script>' in written
    assert urljoin(page_path.as_uri(), "plotly.min.js") == bundle.as_uri()  # resolves from disk (file://)
    assert WHEEL.read_text(encoding="utf-8")[:2000] not in written  # no inline copy of the library
    # bytes: the library (4.8 MB at plotly 7.1) once in the folder; a page, inline before, holds its figures only
    assert bundle.stat().st_size > 4_000_000 and len(written.encode()) < 100_000


def test_the_address_is_relative_to_the_page_and_a_url_path(tmp_path):
    bundle = tmp_path / "reports" / "plotly.min.js"
    bundle.parent.mkdir()
    bundle.write_bytes(b"//")
    for page, src in [
        (tmp_path / "reports" / "binding.html", "plotly.min.js"),
        (tmp_path / "reports" / "sub" / "page.html", "../plotly.min.js"),
        (tmp_path / "other folder" / "page.html", "../reports/plotly.min.js"),
    ]:
        assert interactive.bundle_src(page, bundle) == src
        assert urljoin(page.as_uri(), src) == bundle.as_uri()
    spaced = tmp_path / "my reports" / "plotly.min.js"
    spaced.parent.mkdir()
    spaced.write_bytes(b"//")
    assert interactive.bundle_src(tmp_path / "p.html", spaced) == "my%20reports/plotly.min.js"


def test_a_page_whose_bundle_is_missing_is_refused(tmp_path):
    missing = tmp_path / "plotly.min.js"
    with refuses("paths.plotly_js", missing, "binding.html", "plotly_js"):
        interactive.bundle_src(tmp_path / "binding.html", missing)
