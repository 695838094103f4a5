"""The HTML report's inline stylesheet and script (no external resources: it works offline)."""

from __future__ import annotations

import base64
import hashlib

CSS = """
:root { --base: #3b6fb6; --cand: #e07b39; --bad: #c62828; --warn: #b26a00; --good: #2e7d32;
  --muted: #666; --line: #e2e2e2; --bg-changed: #fff4d6; --bg-removed: #fde7e7;
  --bg-added: #e5f4e7; --bg-moved: #ece7fb; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
  color: #1d1d1d; background: #fafafa; }
header, main, footer { max-width: 1280px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 20px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 20px 0 8px; }
nav a { margin-right: 14px; }
.meta, .note, caption { color: var(--muted); font-size: 12.5px; }
caption { caption-side: bottom; text-align: left; padding-top: 4px; }
table { border-collapse: collapse; margin: 6px 0 12px; background: #fff; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code, pre, .sig { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; }
pre { background: #f4f4f4; padding: 8px 10px; overflow-x: auto; margin: 6px 0; }
table.at-a-glance td { font-size: 13px; }
table.at-a-glance .badge { margin: 0 4px 0 0; }
table.at-a-glance td:nth-child(2) { white-space: nowrap; }
.badge { display: inline-block; border-radius: 3px; padding: 0 6px; font-size: 12px; font-weight: 600;
  color: #fff; background: var(--muted); margin-left: 6px; }
.v-regressed, .s-error { background: var(--bad); }
.v-improved { background: var(--good); }
.v-inconclusive, .s-warning { background: var(--warn); }
.v-unchanged, .s-info { background: #7a8a99; }
.b-plan { background: #6a4fb3; }
.gate-fail { color: var(--bad); font-weight: 600; }
.gate-pass { color: var(--good); font-weight: 600; }
details.query { background: #fff; border: 1px solid var(--line); border-radius: 6px;
  margin: 10px 0; padding: 6px 12px; }
details.query > summary { cursor: pointer; font-size: 15px; padding: 4px 0; }
details.query > summary .why { color: var(--muted); font-size: 13px; margin-left: 6px; }
.grid { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1.1fr); gap: 16px; align-items: start; }
@media (max-width: 900px) { .grid { grid-template-columns: 1fr; } }
svg.chart { width: 100%; height: auto; max-width: 760px; display: block; }
svg.chart[data-kind=plan-diagram] { width: auto; max-width: 100%; height: auto; }
svg.chart text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif !important; }
.side-base { color: var(--base); font-weight: 600; }
.side-cand { color: var(--cand); font-weight: 600; }
ul.findings { padding-left: 18px; margin: 6px 0; }
table.plandiff { width: 100%; font-size: 12.5px; }
table.plandiff td.node { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: nowrap; }
table.plandiff td.node small { color: var(--muted); font-family: system-ui, sans-serif; }
table.plandiff td.gap { border: none; background: #fafafa; width: 8px; padding: 0; }
table.plandiff tr.changed td:not(.gap) { background: var(--bg-changed); }
table.plandiff tr.removed td.b, table.plandiff tr.moved td.b:not(.empty) { background: var(--bg-removed); }
table.plandiff tr.added td.c, table.plandiff tr.moved td.c:not(.empty) { background: var(--bg-added); }
table.plandiff tr.moved td.node:not(.empty) { box-shadow: inset 3px 0 0 #6a4fb3; }
table.plandiff tr:hover td:not(.gap) { outline: 1px solid #9bb3d6; }
td.qerr { color: var(--bad); font-weight: 600; }
table.plandiff td.num.lent { color: #9a9a9a; font-style: italic; }
.legend span { display: inline-block; padding: 0 6px; margin-right: 6px; border: 1px solid var(--line); }
.toolbar { margin: 8px 0; }
.toolbar button { font: inherit; font-size: 12.5px; padding: 2px 10px; margin-right: 6px; cursor: pointer; }
.plan-json { white-space: nowrap; font-size: 12px; }
.plan-json button, .plan-json a { font: inherit; font-size: 12px; margin-left: 4px; }
.plan-json button { padding: 0 6px; cursor: pointer; }
.conditions { font-weight: normal; color: var(--muted); font-size: 12px; white-space: normal; }
footer { color: var(--muted); font-size: 12px; padding: 24px; }
"""

JS = """
document.addEventListener('DOMContentLoaded', function () {
  function setAll(open) {
    document.querySelectorAll('details.query').forEach(function (d) { d.open = open; });
  }
  var expand = document.getElementById('expand-all');
  var collapse = document.getElementById('collapse-all');
  if (expand) { expand.addEventListener('click', function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener('click', function () { setAll(false); }); }
  document.querySelectorAll('a[href^="#q-"]').forEach(function (a) {
    a.addEventListener('click', function () {
      var target = document.getElementById(a.getAttribute('href').slice(1));
      if (target && target.tagName === 'DETAILS') { target.open = true; }
    });
  });
  function planJson(button) {
    var link = document.getElementById(button.getAttribute('data-plan'));
    var href = link ? link.getAttribute('href') : '';
    return decodeURIComponent(href.slice(href.indexOf(',') + 1));
  }
  document.querySelectorAll('button.copy-json').forEach(function (button) {
    var json = planJson(button);
    var label = button.textContent;
    function copied(text) {
      button.textContent = text;
      setTimeout(function () { button.textContent = label; }, 1500);
    }
    button.title = 'copy ' + json.length + ' characters of EXPLAIN JSON (for pev2 / explain.dalibo.com)';
    button.setAttribute('data-length', String(json.length));
    function viaSelection() {
      var area = document.createElement('textarea');
      area.value = json;
      document.body.appendChild(area);
      area.select();
      var done = false;
      try { done = document.execCommand('copy'); } catch (e) { done = false; }
      document.body.removeChild(area);
      copied(done ? 'copied' : 'copy failed');
    }
    button.addEventListener('click', function () {
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(json).then(function () { copied('copied'); },
          viaSelection);
      } else {
        viaSelection();
      }
    });
  });
  document.body.setAttribute('data-ready', 'yes');
});
"""


def csp(script: str) -> str:
    """The page's Content-Security-Policy: nothing from the network, inline styles and data:
    images (the charts), and no script but `script` (allowed by its hash; none when empty)."""
    if script:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        scripts = f"'sha256-{digest}'"
    else:
        scripts = "'none'"
    policy = (
        f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src {scripts}; "
        "base-uri 'none'; form-action 'none'"
    )
    return f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
