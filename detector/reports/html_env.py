"""The HTML reports' templates (detector/reports/templates/, Jinja2) and how they are rendered.

Every value a template prints is escaped for HTML (autoescape) after escape.visible has taken
out escape sequences and control characters: names, SQL and plan text come from workload
files and production logs. Only what a report made itself is passed as markup (`Markup`).
The stylesheet and the script are inlined (the page works offline); the Content-Security-Policy
lets that one script run, by its hash, and nothing from the network.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from detector.model.units import fmt_count, fmt_ms, fmt_version
from detector.reports.common import fmt_number, fmt_tick
from detector.reports.escape import visible
from detector.version import __version__


def _finalize(value: Any) -> Any:
    """What `{{ ... }}` prints: text without control characters; markup and numbers as they are."""
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return visible(value)


def _thousands(value: float) -> str:
    return f"{value:,}"


def _px(value: float) -> str:
    """A coordinate: one decimal, none when it is whole (SVGs stay small)."""
    return f"{value:.1f}".removesuffix(".0")


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("detector.reports", "templates"),
        autoescape=True,
        finalize=_finalize,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        ms=fmt_ms, count=fmt_count, number=fmt_number, tick=fmt_tick, version=fmt_version,
        thousands=_thousands, px=_px,
    )  # fmt: skip
    env.globals.update(version=__version__)
    return env


@cache
def asset(name: str) -> str:
    """A file of the templates folder as it is (the stylesheet, the script)."""
    return files("detector.reports").joinpath("templates", name).read_text()


def pack(texts: Sequence[str]) -> str:
    """Texts a page's script unpacks (report.js): a JSON list, raw-deflated, in base64. Similar
    texts (a sweep's plans, its points' blocks) compress together 10-50x."""
    if not texts:
        return ""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: DecompressionStream's
    data = json.dumps(list(texts)).encode()
    return base64.b64encode(packer.compress(data) + packer.flush()).decode()


def csp(script: str) -> Markup:
    """The page's Content-Security-Policy: nothing from the network, inline styles and data:
    images, and no script but `script` (allowed by its hash; none when empty)."""
    if script:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        scripts = f"'sha256-{digest}'"
    else:
        scripts = "'none'"
    policy = (
        f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src {scripts}; "
        "base-uri 'none'; form-action 'none'"
    )
    # made of constants and a base64 digest: nothing to escape (its quotes must stay quotes)
    return Markup(f'<meta http-equiv="Content-Security-Policy" content="{policy}">')


def render_page(template: str, *, script: bool = True, **context: Any) -> str:
    """A whole page: `template` with the stylesheet, and the report script when `script`."""
    js = asset("report.js") if script else ""
    return (
        environment()
        .get_template(template)
        .render(css=Markup(asset("report.css")), js=Markup(js), csp=csp(js), **context)
    )


def render_fragment(template: str, **context: Any) -> str:
    """Part of a page (an SVG chart, a plan diff) as markup to place in another template."""
    return Markup(environment().get_template(template).render(**context))
