"""Headless Chromium (Debian's `chromium`, installed by scripts/bootstrap.sh --test) for the HTML
tests and scripts/screenshots.py: render a page, dump its DOM after the scripts ran, screenshot
it, and read the dumped DOM back into a small element tree to assert on."""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

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
    """The page's DOM after Chromium ran its scripts; fails on a console error or CSP refusal."""
    result = chromium(page, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_problems(result.stderr) == []
    return parse_dom(result.stdout)
