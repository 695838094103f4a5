"""The README's output blocks are what the code prints today (scripts/readme_outputs.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "readme_outputs.py"


@pytest.mark.pg
def test_readme_outputs_are_current() -> None:
    checked = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr


def test_the_readme_has_output_blocks_of_both_kinds() -> None:
    text = (ROOT / "README.md").read_text()
    assert "<!-- output of: planshift " in text and "<!-- output of the block above" in text


def test_a_stale_block_is_found(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import readme_outputs
    finally:
        sys.path.remove(str(SCRIPT.parent))
    stale = "```python\nprint(6 * 7)\n```\n\n<!-- output of the block above -->\n```text\n41\n```\n"
    assert readme_outputs.refreshed(stale) == stale.replace("41", "42")
