"""How the processes of a parallel ingest start: a fork server that imports planshift (and not
the CLI's main script, nor a package of the user's working directory), and workers that exit
when the ingest process dies."""

from __future__ import annotations

import gc
import os
import site
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PARENT_CHECK_SECONDS = 0.5


def start_worker(parent: int) -> None:
    """Worker set-up: the ingest process's GC settings, and exit if that process dies (a
    killed ingest must not leave workers behind)."""
    gc.set_threshold(50_000, 20, 50)  # as the ingest process: many short-lived dicts

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_SECONDS)
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                os._exit(1)

    threading.Thread(target=watch, name="planshift-parent-watch", daemon=True).start()


@contextmanager
def main_unseen() -> Iterator[None]:
    """Workers that do not run the main script's imports (multiprocessing would, to find
    functions defined there: the CLI and DuckDB, ~0.2 s of CPU and memory per worker)."""
    main = sys.modules.get("__main__")
    saved = {
        name: main.__dict__[name]
        for name in ("__file__", "__spec__")
        if main and name in main.__dict__
    }
    try:
        for name in saved:
            setattr(main, name, None) if name == "__spec__" else delattr(main, name)
        yield
    finally:
        for name, value in saved.items():
            setattr(main, name, value)


@contextmanager
def planshift_imported() -> Iterator[None]:
    """A fork server that imports this process's planshift. It runs `python -c`, which puts the
    working directory first on its import path (Python 3.11 does not apply the sys.path
    multiprocessing hands it): a `collectors/` directory where the user stands was imported
    instead, and every worker died. It starts without the working directory
    (PYTHONSAFEPATH) and, when planshift is not installed but imported from a checkout, with
    that checkout first."""
    root = os.path.realpath(Path(__file__).parents[2])
    installed = {os.path.realpath(path) for path in site.getsitepackages()}
    saved = {name: os.environ.get(name) for name in ("PYTHONSAFEPATH", "PYTHONPATH")}
    os.environ["PYTHONSAFEPATH"] = "1"
    if root not in installed:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (root, saved["PYTHONPATH"])))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
