"""Headless Chromium (Debian's `chromium`, installed by scripts/bootstrap.sh --test) for the HTML
tests and scripts/screenshots.py: render a page, dump its DOM after the scripts ran, screenshot
it, read the dumped DOM back into a small element tree to assert on, and drive a page over the
DevTools protocol (clicks, the clipboard)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
)  # fmt: skip
# a console message (`CONSOLE(7)]` or, in newer builds, `CONSOLE:7]`), CSP refusals included
CONSOLE_PROBLEM = re.compile(
    r"CONSOLE(?:\(\d+\)|:\d+)\].*|Uncaught .*|Failed to load resource.*|Refused to .*"
)
# resolves when the page's script has finished (the report sets body[data-ready] at its end),
# or after 30 s (a page without the script)
READY = """new Promise(function (resolve) {
  var left = 3000;
  (function poll() {
    if (document.body && document.body.getAttribute('data-ready')) { resolve(true); }
    else if (--left <= 0) { resolve(false); }
    else { setTimeout(poll, 10); }
  })();
})"""
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium missing: apt-get install chromium (scripts/bootstrap.sh does as root)",
)


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="planshift-chromium-") as profile:
        return subprocess.run(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip


def console_problems(stderr: str) -> list[str]:
    return [m.group(0) for m in CONSOLE_PROBLEM.finditer(stderr)]


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 2000) -> None:
    result = chromium(page, f"--window-size={width},{height}", f"--screenshot={png}")
    if result.returncode != 0 or not png.exists():
        raise RuntimeError(f"chromium could not screenshot {page}: {result.stderr[-2000:]}")


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def walk(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            yield from child.walk()

    def find_all(self, tag: str, css_class: str | None = None, **attrs: str) -> list[Element]:
        """Descendants (and self) with this tag, class and attribute values (`data_x` is data-x)."""
        wanted = {name.replace("_", "-"): value for name, value in attrs.items()}
        return [
            e
            for e in self.walk()
            if e.tag == tag
            and (css_class is None or css_class in e.classes())
            and all(e.attrs.get(k) == v for k, v in wanted.items())
        ]

    def content(self) -> str:
        """All text inside, as one string with single spaces."""
        parts = [*self.text]
        for child in self.children:
            parts.append(child.content())
        return " ".join(" ".join(parts).split())


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.open[-1].children.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.open[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.open) - 1, 0, -1):
            if self.open[depth].tag == tag:
                del self.open[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.open[-1].text.append(data)


def parse_dom(text: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    return builder.root


def rendered(page: Path) -> Element:
    """The page's DOM after Chromium ran its scripts; fails on a console error or CSP refusal.
    The virtual time budget lets the page finish what it does after the load event (the
    report inflates its plans' JSON asynchronously) before the DOM is dumped."""
    result = chromium(page, "--virtual-time-budget=30000", "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_problems(result.stderr) == []
    return parse_dom(result.stdout)


class DevTools:
    """A page in Chromium driven over `--remote-debugging-pipe` (DevTools protocol messages,
    each ended by a NUL byte, on file descriptors 3 and 4), for what a DOM dump cannot show:
    clicks with a user gesture, and the clipboard."""

    def __init__(self, page: Path) -> None:
        self.page = page
        # Chromium's helper processes may still write to the profile as the browser exits
        self.profile = tempfile.TemporaryDirectory(
            prefix="planshift-chromium-", ignore_cleanup_errors=True
        )
        self.pending = b""
        self.events: list[dict[str, Any]] = []  # received while waiting for something else
        self.last_id = 0
        self.session = ""

    def __enter__(self) -> DevTools:
        to_chromium, self.writer = os.pipe()
        self.reader, from_chromium = os.pipe()

        def on_fds_3_and_4() -> None:  # in the child: move the ends out of the way first
            read_end = fcntl.fcntl(to_chromium, fcntl.F_DUPFD, 10)
            write_end = fcntl.fcntl(from_chromium, fcntl.F_DUPFD, 10)
            os.dup2(read_end, 3)  # dup2 to another number makes it inheritable
            os.dup2(write_end, 4)

        self.process = subprocess.Popen(
            [str(CHROMIUM), *FLAGS, "--remote-debugging-pipe",
             f"--user-data-dir={self.profile.name}", "about:blank"],
            preexec_fn=on_fds_3_and_4, close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_chromium)
        os.close(from_chromium)
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        self.call(
            "Browser.grantPermissions",
            {"permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
        )
        self.call("Page.enable")
        self.call("Network.enable")
        self.call("Page.navigate", {"url": self.page.as_uri()})
        self.event("Page.loadEventFired")
        self.evaluate(READY)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.call("Browser.close")
            self.process.wait(timeout=60)
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        os.close(self.writer)
        os.close(self.reader)
        self.profile.cleanup()

    def requested(self) -> list[str]:
        """The URLs the page requested so far (Network.requestWillBeSent)."""
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def event(self, method: str, **params: Any) -> dict[str, Any]:
        """The first event `method` whose parameters include `params`, waiting for it."""

        def wanted(message: dict[str, Any]) -> bool:
            found = message.get("params", {})
            return message.get("method") == method and all(
                found.get(k) == v for k, v in params.items()
            )

        for index, message in enumerate(self.events):
            if wanted(message):
                return self.events.pop(index)
        return self._receive(wanted)

    def _receive(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            while b"\0" not in self.pending:
                ready, _, _ = select.select([self.reader], [], [], 60)
                chunk = os.read(self.reader, 1 << 16) if ready else b""
                if not chunk:
                    raise RuntimeError("Chromium stopped answering")
                self.pending += chunk
            raw, _, self.pending = self.pending.partition(b"\0")
            message: dict[str, Any] = json.loads(raw)
            if wanted(message):
                return message
            if "method" in message:
                self.events.append(message)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.last_id += 1
        request: dict[str, Any] = {"id": self.last_id, "method": method, "params": params or {}}
        if self.session and not method.startswith(("Target.", "Browser.")):
            request["sessionId"] = self.session
        os.write(self.writer, json.dumps(request).encode() + b"\0")
        reply = self._receive(lambda message: message.get("id") == self.last_id)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply["result"]
        return result

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited when a promise), run as a user gesture."""
        reply = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True,
             "userGesture": True},
        )  # fmt: skip
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")
