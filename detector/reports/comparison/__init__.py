"""A comparison as each report format renders it: terminal, JSON, Markdown, JUnit, GitHub
annotations and the HTML page (`html.py`) with its plan diffs, charts and sweeps."""
