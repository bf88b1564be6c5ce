"""Every generated page of the tiny run, opened from disk in headless Chromium: no console error,
every image decoded, every internal link and anchor resolves, every plot drawn by the one plotly.js
beside the pages, nothing fetched off the machine; a screenshot per page under the run's
reports/screenshots/ (git-ignored)."""

from __future__ import annotations

import importlib.resources
import os

import pytest
from browser import CHROMIUM, Browser, BrowserError, check_page, problems
from conftest import copy_run, run
from refusals import refuses

PAGES = {"index.html", "binding.html", "associations.html", "grounding.html", "grounding_visual.html"}
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="  # 1x1 PNG


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.is_file():  # fail, never skip: CI installs it
        pytest.fail(f"{CHROMIUM} is missing: install the Debian package chromium (apt-get install -y chromium)")
    with Browser() as b:
        yield b


def test_every_generated_page_opens_clean_from_disk(tiny_run, tmp_path, browser):
    root = copy_run(tiny_run, tmp_path / "run")  # the screenshots go into the copy
    pages = sorted((root / "reports").glob("*.html"))
    assert {p.name for p in pages} == PAGES
    shots = root / "reports" / "screenshots"
    reports = [check_page(browser, page, shots / f"{page.stem}.png") for page in pages]
    assert problems(reports) == []  # every interactive plot drawn, its legend hiding a series on a click
    plots = {r.path.name: [p["id"] for p in r.plots] for r in reports}
    assert len(plots["binding.html"]) == 4 and plots["index.html"] == []  # LLC, hop classes, stress, aids
    assert plots["associations.html"] == ["plot-cosines-over-training"]
    assert plots["grounding.html"] == [
        "plot-template-gain-per-architecture",
        "plot-natural-turn-gain-per-architecture",
        "plot-grounding-local-learning-coefficient",
    ]
    assert plots["grounding_visual.html"] == ["plot-visual-gain-per-setting"]
    # each page with a plot drew it with the one shared file, the wheel's plotly.js, loaded from disk;
    # the pages carry their figures only (each held the 4.8 MB library inline before)
    bundle = root / "reports" / "plotly.min.js"
    assert bundle.read_bytes() == (importlib.resources.files("plotly") / "package_data" / "plotly.min.js").read_bytes()
    scripts = {r.path.name: r.scripts for r in reports}
    assert scripts == {name: [bundle.resolve().as_uri()] if ids else [] for name, ids in plots.items()}
    assert all(page.stat().st_size < 2_000_000 < bundle.stat().st_size for page in pages)
    index = next(r for r in reports if r.path.name == "index.html")
    internal = [link for link in index.links if link.startswith("file:") and "#" in link]
    assert {link.split("#")[0].rsplit("/", 1)[1] for link in internal} >= PAGES  # claims link into every page
    for page in pages:
        shot = shots / f"{page.stem}.png"
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 1000, shot
    assert run(["git", "status", "--porcelain", "--ignored=no", "reports/screenshots"], root).stdout == ""


def test_checker_finds_each_kind_of_breakage(tmp_path, browser):
    """The checks above pass only if they can fail: a page with one fault of each kind."""
    (tmp_path / "b.html").write_text('<!DOCTYPE html><html><body><p id="there">b</p></body></html>')
    (tmp_path / "a.html").write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><h2 id="top">a</h2>'
        f'<img alt="fine" src="data:image/png;base64,{PIXEL}"><img alt="gone" src="gone.png">'
        '<img alt="far" src="http://127.0.0.1:9/far.png">'
        '<a href="#top">ok</a><a href="#nowhere">x</a><a href="b.html#there">ok</a><a href="b.html#gone">x</a>'
        '<a href="missing.html">x</a><a href="https://arxiv.org/abs/2510.13796">paper</a>'
        '<div id="broken" class="plotly-graph-div"></div><script src="gone.js"></script>'
        '<script>console.error("boom")</script></body></html>'
    )
    reports = [check_page(browser, tmp_path / n, tmp_path / "shots" / f"{n}.png") for n in ("a.html", "b.html")]
    found = problems(reports)
    uri = (tmp_path / "a.html").as_uri().rsplit("/", 1)[0]
    expected = {
        "a.html: console error: boom",
        "a.html: image not decoded: gone.png",
        "a.html: image not decoded: http://127.0.0.1:9/far.png",
        "a.html: request off the machine: http://127.0.0.1:9/far.png",
        f"a.html: link to a missing anchor: {uri}/a.html#nowhere",
        f"a.html: link to a missing anchor: {uri}/b.html#gone",
        f"a.html: link to a missing file: {uri}/missing.html",
        "a.html: plot not drawn: broken",
        f"a.html: script file missing: {uri}/gone.js",
    }
    assert expected <= set(found)
    assert all("Failed to load resource" in e for e in set(found) - expected)  # two images, the script, as logged
    assert os.path.getsize(tmp_path / "shots" / "a.html.png") > 0


def test_missing_chromium_is_one_line(tmp_path):
    with refuses(tmp_path / "chromium", "apt-get install chromium", error=BrowserError):  # the path, and the fix
        Browser(tmp_path / "chromium")
