from __future__ import annotations

from detector.cli.app import main

main()
