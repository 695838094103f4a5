from __future__ import annotations

from detector.cli import main

main()
