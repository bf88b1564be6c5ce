"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol through a pipe
(`--remote-debugging-pipe`: messages are JSON, each ended by a NUL byte, on file descriptors 3 and
4), so no driver package is needed. `check_page` opens one page from disk and reports what a reader
would see break: console errors, images that did not decode, requests leaving the machine, scripts
loaded from files, and the page's links and anchors; `problems` resolves every internal link, anchor
and script file across the pages."""

from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

CHROMIUM = Path("/usr/bin/chromium")  # Debian package `chromium`
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
]
WIDTH, HEIGHT = 1280, 900  # viewport of the screenshots (the full page height is captured)
LOCAL_SCHEMES = ("file", "data", "about", "chrome-error")

# Run in the page once it has loaded: wait for every image to decode, then read what the checks need.
INSPECT = """(async () => {
  PLOTS_FUNCTION
  const images = [...document.images];
  await Promise.all(images.map(i => i.decode().catch(() => null)));
  return {
    images: images.map(i => ({src: (i.getAttribute('src') || '').slice(0, 80), width: i.naturalWidth})),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    scripts: [...document.scripts].filter(s => s.src).map(s => s.src),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id)
      .concat([...document.querySelectorAll('a[name]')].map(a => a.name)),
    plots: await plots(),
  };
})()"""

# Each interactive plot: drawn (an svg), a legend entry per series, and a click on the first entry
# hides that series (plotly waits out a double click first, hence the pause).
PLOTS = """async function plots() {
  const out = [];
  for (const d of document.querySelectorAll('.plotly-graph-div')) {
    const toggle = d.querySelector('.legend .traces .legendtoggle');
    let hidden = null;
    if (toggle) {
      for (const type of ['mousedown', 'mouseup'])
        toggle.dispatchEvent(new MouseEvent(type, {bubbles: true, clientX: 1, clientY: 1, buttons: 1}));
      await new Promise(r => setTimeout(r, 700));
      hidden = Boolean(d.data && d.data[0] && d.data[0].visible === 'legendonly');
    }
    out.push({id: d.id, drawn: Boolean(d.querySelector('.main-svg')), series: (d.data || []).length,
              legend: d.querySelectorAll('.legend .traces').length, hidden});
  }
  return out;
}"""


class BrowserError(RuntimeError):
    pass


class Browser:
    """One Chromium process; `call` sends a command and returns its result, keeping the events that
    arrive meanwhile (console messages, load events, network requests) in `events`."""

    def __init__(self, executable: Path = CHROMIUM, timeout: float = 60.0):
        if not executable.is_file():
            raise BrowserError(f"{executable} not found: install Debian's package chromium (apt-get install chromium)")
        self.timeout, self.events, self._next, self._buffer = timeout, [], 0, b""
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-")
        self._log = tempfile.TemporaryFile()
        to_browser, self._to = os.pipe()  # we write commands, Chromium reads them on fd 3
        self._from, from_browser = os.pipe()  # Chromium writes replies and events on fd 4

        def on_fds_3_and_4():  # runs in the child before exec
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self.process = subprocess.Popen(
            [str(executable), *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
            preexec_fn=on_fds_3_and_4,
            pass_fds=(3, 4),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        os.close(to_browser)
        os.close(from_browser)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.call("Browser.close")
                self.process.wait(timeout=10)
            except (BrowserError, OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for fd in (self._to, self._from):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()
        self._profile.cleanup()

    def _died(self, what: str) -> BrowserError:
        self._log.seek(0)
        tail = self._log.read()[-2000:].decode(errors="replace")
        return BrowserError(f"chromium {what} (exit {self.process.poll()}): {tail}")

    def _read(self, deadline: float) -> dict:
        """The next message from Chromium, waiting at most until `deadline`."""
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise self._died("did not answer in time")
            chunk = os.read(self._from, 1 << 20)
            if not chunk:
                raise self._died("closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        try:
            os.write(self._to, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise self._died("is gone") from None
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            self.events.append(self._read(deadline))


@dataclass
class PageReport:
    path: Path
    console_errors: list[str] = field(default_factory=list)
    broken_images: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  # as the browser resolves them (absolute URLs)
    scripts: list[str] = field(default_factory=list)  # <script src>, resolved likewise (plotly.js beside the page)
    ids: set[str] = field(default_factory=set)
    plots: list[dict] = field(default_factory=list)  # id, drawn, series, legend, hidden (after a legend click)


def _console_errors(events: list[dict]) -> list[str]:
    errors = []
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = p.get("exceptionDetails", {})
            errors.append(details.get("exception", {}).get("description") or details.get("text", "exception"))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            errors.append(f"{entry.get('text')} {entry.get('url', '')}".strip())
    return errors


def check_page(browser: Browser, path: Path, screenshot: Path) -> PageReport:
    """Open `path` from disk (file://) in a fresh tab, let it load, inspect it, save a full-page PNG."""
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable", session=session)
    metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
    browser.call("Emulation.setDeviceMetricsOverride", metrics, session=session)
    first = len(browser.events)
    navigated = browser.call("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
    if "errorText" in navigated:
        raise BrowserError(f"{path}: {navigated['errorText']}")
    browser.wait_for("Page.loadEventFired", session)
    found = browser.call(
        "Runtime.evaluate",
        {"expression": INSPECT.replace("PLOTS_FUNCTION", PLOTS), "awaitPromise": True, "returnByValue": True},
        session=session,
    )
    if "exceptionDetails" in found:
        raise BrowserError(f"{path}: inspecting the page failed: {found['exceptionDetails'].get('text')}")
    seen = found["result"]["value"]
    size = browser.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = browser.call(
        "Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True}, session=session
    )
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    events = [e for e in browser.events[first:] if e.get("sessionId") == session]
    browser.call("Target.closeTarget", {"targetId": target})
    requests = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    return PageReport(
        path=path.resolve(),
        console_errors=_console_errors(events),
        broken_images=[i["src"] for i in seen["images"] if i["width"] == 0],
        external_requests=[u for u in requests if urlsplit(u).scheme not in LOCAL_SCHEMES],
        links=seen["links"],
        scripts=seen["scripts"],
        ids=set(seen["ids"]),
        plots=seen["plots"],
    )


def problems(reports: list[PageReport]) -> list[str]:
    """One line per problem: console errors, undecoded images, requests off the machine, a script whose
    file does not exist, and every internal link whose file does not exist or whose anchor is not an id
    of the page it points to (a linked page must be among `reports`, so its ids are known)."""
    pages = {r.path: r for r in reports}
    out = []
    for r in reports:
        name = r.path.name
        out += [f"{name}: console error: {e}" for e in r.console_errors]
        out += [f"{name}: image not decoded: {src}" for src in r.broken_images]
        out += [f"{name}: request off the machine: {u}" for u in r.external_requests]
        out += [
            f"{name}: script file missing: {s}"
            for s in r.scripts
            if urlsplit(s).scheme == "file" and not Path(unquote(urlsplit(s).path)).is_file()
        ]
        for p in r.plots:
            if not p["drawn"]:
                out.append(f"{name}: plot not drawn: {p['id']}")
            elif p["legend"] != p["series"] or not p["hidden"]:
                out.append(f"{name}: plot legend does not hide its series: {p['id']}")
        for link in r.links:
            url = urlsplit(link)
            if url.scheme != "file":
                continue  # not an internal link (a citation's web address, mail)
            target = Path(unquote(url.path))
            if not target.exists():
                out.append(f"{name}: link to a missing file: {link}")
            elif url.fragment and target not in pages:
                out.append(f"{name}: link to an anchor of a page not checked: {link}")
            elif url.fragment and unquote(url.fragment) not in pages[target].ids:
                out.append(f"{name}: link to a missing anchor: {link}")
    return out
