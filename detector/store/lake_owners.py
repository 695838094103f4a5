"""Which store owns a host name in a lake: an owner token per host, and a lock while it exports.

`LAKE/_owners/HOST.json` names the store (its `store_identity`, path and machine) that first
exported under HOST; it is linked into place (link(2) refuses an existing name), so of two
stores claiming a name at once one wins. An export by another store under that name is refused
(two hosts' logs must not overwrite each other), an export by the same store (a copy included)
goes on. While a store exports, it holds flock on the token, so two exports of one host (two
cron jobs) take turns.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from detector.errors import PlanshiftError
from detector.model.records import utc_now
from detector.store.locking import WaitCallback, exclusive

OWNERS = "_owners"


def token_path(lake: Path, host: str) -> Path:
    return lake / OWNERS / f"{host}.json"


@contextmanager
def exporting(
    lake: Path, host: str, store_id: str, store_path: Path, *, wait: float, on_wait: WaitCallback
) -> Iterator[None]:
    """Claim `host` for this store (or check it is this store's), then hold its export lock."""
    token = token_path(lake, host)
    claim(token, host, store_id, store_path)
    with exclusive(token, what=f"host {host} in lake {lake}", wait=wait, on_wait=on_wait):
        yield


def claim(token: Path, host: str, store_id: str, store_path: Path) -> None:
    mine = {
        "store_id": store_id,
        "store": str(store_path.resolve()),
        "machine": socket.gethostname(),
        "claimed_at": utc_now().isoformat(timespec="seconds"),
    }
    token.parent.mkdir(parents=True, exist_ok=True)
    # written beside, then linked: link(2) fails on an existing name, and a token is never
    # seen half-written (a claim killed midway leaves a hidden file, not a broken token)
    hidden = token.with_name(f".{token.name}.{os.getpid()}.{secrets.token_hex(4)}")
    hidden.write_text(json.dumps(mine, indent=1) + "\n")
    try:
        os.link(hidden, token)
    except FileExistsError:
        owner = read_token(token)
        if owner.get("store_id") != store_id:
            raise PlanshiftError(
                f"host {host} in the lake belongs to another store: {owner.get('store')} on "
                f"{owner.get('machine')} (since {owner.get('claimed_at')}); this store "
                f"({store_path}) would overwrite its files",
                f"export this store under its own name (--source/--name); if that store is gone "
                f"for good, remove {token} to hand the name over",
            ) from None
    finally:
        hidden.unlink(missing_ok=True)


def read_token(token: Path) -> dict[str, Any]:
    try:
        data = json.loads(token.read_text())
    except (OSError, ValueError) as exc:
        raise PlanshiftError(
            f"the lake's owner token {token} is unreadable: {exc}",
            "it names the store that exports under that host name; restore it, or remove it "
            "if you know which store owns the name",
        ) from exc
    if not isinstance(data, dict):
        raise PlanshiftError(f"the lake's owner token {token} is not a JSON object", "remove it")
    return data
