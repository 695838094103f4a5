"""Who may create, write and remove a store file, when several processes start on it at once.

- Creation is atomic: a new store is built and migrated in a hidden file beside it
  (`.NAME.creating-HOST-PID-RANDOM`), locked, then linked into place with link(2), which fails
  when the name exists (a hidden file left by a creator killed midway is removed by the next
  writer on that host once its process is gone). Of two processes starting on a new store, one
  links its file; the other removes its own hidden file and opens the one that was linked. A
  store at its name is always a complete, migrated store.
- A writer holds flock(LOCK_EX) on the store file for as long as it has the store open (a lock
  of planshift's own: DuckDB's fcntl lock ends when its connection closes). A second writer
  waits, saying which process holds the store, for at most PLANSHIFT_STORE_WAIT seconds
  (default 60), then fails with an error and a hint. Within one process the lock is shared (a
  second Store of the same file shares DuckDB's database too).
- Only the process that linked a store removes it, only while it still holds the lock, and only
  when the store holds nothing (the facade decides). A writer that waited and then gets the lock
  checks that the file it locked is still the one at the path, and starts over when it is not.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from detector.errors import PlanshiftError
from detector.store.owner import Owner, is_gone

WAIT_VARIABLE = "PLANSHIFT_STORE_WAIT"
DEFAULT_WAIT_S = 60.0
POLL_S = 0.1
_NOT_WRITABLE = (errno.EPERM, errno.EACCES, errno.EROFS)

WaitCallback = Callable[[str], None]


def print_wait(message: str) -> None:
    """The default: a line on stderr (stdout may carry a JSON report)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def store_wait() -> float:
    """Seconds a command waits for a store another process holds (PLANSHIFT_STORE_WAIT)."""
    text = os.environ.get(WAIT_VARIABLE)
    if text is None or not text.strip():
        return DEFAULT_WAIT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 86_400:
        raise PlanshiftError(
            f"{WAIT_VARIABLE}={text!r}: expected seconds between 0 and 86400",
            f"for example {WAIT_VARIABLE}=300, or unset it for {DEFAULT_WAIT_S:.0f} s",
        )
    return seconds


@dataclass
class StoreLock:
    """The exclusive lock of one writer process on a store file (shared by its Stores)."""

    path: Path
    fd: int
    key: tuple[int, int]  # (device, inode) of the locked file
    created: bool  # this process linked the file into place
    users: int = field(default=1)

    def release(self) -> None:
        with _HELD_GUARD:
            self.users -= 1
            if self.users > 0:
                return
            _HELD.pop(self.key, None)
        os.close(self.fd)  # closing the descriptor releases the flock

    def remove(self, created_dirs: list[Path]) -> None:
        """Remove the store this process created (the caller checked it holds nothing), while
        the lock is held, then release the lock: a waiter sees the file gone and starts over."""
        if not self.created or self.users > 1:
            self.release()
            return
        try:
            if _same_file(self.fd, self.path):
                for leftover in (self.path, wal_of(self.path)):
                    leftover.unlink(missing_ok=True)
                for directory in created_dirs:
                    try:
                        directory.rmdir()
                    except OSError:
                        break
        finally:
            self.release()


_HELD: dict[tuple[int, int], StoreLock] = {}
_HELD_GUARD = threading.Lock()


def wal_of(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def lock_for_writing(
    path: Path, build: Callable[[Path], None], *, wait: float, on_wait: WaitCallback
) -> StoreLock:
    """The writer's lock on `path`, creating the store with `build(hidden_path)` when absent."""
    deadline = time.monotonic() + wait
    announced = False
    _sweep_abandoned(path)
    while True:
        shared = _held_by_this_process(path)
        if shared is not None:
            return shared
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            created = _create(path, build)
            if created is not None:
                return created
            continue  # another process linked its store first: open that one
        except OSError as exc:
            raise not_writable(path, exc) from exc
        key = _key(os.fstat(fd))
        while not _try_flock(fd):
            if time.monotonic() >= deadline:
                holder = lock_holder(fd)
                os.close(fd)
                raise PlanshiftError(
                    f"store {path} is still in use by {holder} after {wait:g} s",
                    f"wait for it to finish, pass another --store, or wait longer with "
                    f"{WAIT_VARIABLE}=SECONDS",
                )
            if not announced:
                on_wait(
                    f"store {path} is in use by {lock_holder(fd)}: waiting for it "
                    f"(up to {wait:g} s, {WAIT_VARIABLE})"
                )
                announced = True
            time.sleep(POLL_S)
        if _same_file(fd, path):
            return _register(StoreLock(path, fd, key, created=False))
        os.close(fd)  # its creator removed that file while we waited: start over


@contextmanager
def exclusive(path: Path, *, what: str, wait: float, on_wait: WaitCallback) -> Iterator[None]:
    """flock(LOCK_EX) on an existing file that is never removed (a lake's owner token) for the
    duration, waiting like a store's writer; `what` names it in messages."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + wait
        announced = False
        while not _try_flock(fd):
            if time.monotonic() >= deadline:
                raise PlanshiftError(
                    f"{what} is still in use by {lock_holder(fd)} after {wait:g} s",
                    f"wait for it to finish, or wait longer with {WAIT_VARIABLE}=SECONDS",
                )
            if not announced:
                on_wait(f"{what} is in use by {lock_holder(fd)}: waiting for it")
                announced = True
            time.sleep(POLL_S)
        yield
    finally:
        os.close(fd)


def not_writable(path: Path, exc: OSError, *, creating: bool = False) -> PlanshiftError:
    if exc.errno in _NOT_WRITABLE or exc.errno == errno.ENOSPC:
        if creating:
            return PlanshiftError(
                f"cannot create store {path}: its directory refuses new files: {exc.strerror}",
                f"check the permissions of {path.parent}, `lsattr -d {path.parent}` (chattr -i), "
                "free space, and whether its file system is mounted read-only; or pass another "
                "--store",
            )
        return PlanshiftError(
            f"store {path} is not writable: {exc.strerror}",
            f"check its permissions, `lsattr {path}` (the immutable attribute, chattr -i) and "
            "whether its file system is mounted read-only; or pass another --store",
        )
    return PlanshiftError(
        f"cannot open store {path}: {exc.strerror}",
        f"check the permissions of {path} and its directory",
    )


def _create(path: Path, build: Callable[[Path], None]) -> StoreLock | None:
    """Build the store in a hidden file and link it into place; None when another process's
    store took the name first."""
    hidden = path.with_name(f"{_hidden_prefix(path)}{os.getpid()}-{secrets.token_hex(4)}")
    try:
        try:  # a directory that refuses new files says so here, in the store's own name
            os.close(os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
            hidden.unlink()  # DuckDB creates the file itself (it refuses an empty one)
            build(hidden)
            fd = os.open(hidden, os.O_RDWR | os.O_CLOEXEC)
        except OSError as exc:
            raise not_writable(path, exc, creating=True) from exc
        except PlanshiftError as exc:  # e.g. the disk filled up while building
            raise PlanshiftError(
                exc.message.replace(str(hidden), str(path)),
                exc.hint.replace(str(hidden), str(path)) if exc.hint else None,
            ) from exc
        fcntl.flock(fd, fcntl.LOCK_EX)  # nobody else knows the hidden name: at once
        try:
            _link(hidden, path)
        except FileExistsError:
            os.close(fd)
            return None
        except OSError as exc:
            os.close(fd)
            raise not_writable(path, exc, creating=True) from exc
        return _register(StoreLock(path, fd, _key(os.fstat(fd)), created=True))
    finally:
        for leftover in (hidden, wal_of(hidden)):
            leftover.unlink(missing_ok=True)


def _hidden_prefix(path: Path) -> str:
    return f".{path.name}.creating-{socket.gethostname()}-"


def _sweep_abandoned(path: Path) -> None:
    """Hidden files of creations killed midway (SIGKILL, power loss) on this host: never linked,
    they hold nothing; removed when their process is gone."""
    prefix = _hidden_prefix(path)
    for leftover in path.parent.glob(f"{glob.escape(prefix)}*"):
        pid = leftover.name.removeprefix(prefix).split("-")[0]
        if pid.isdigit() and is_gone(Owner(socket.gethostname(), int(pid), None)):
            leftover.unlink(missing_ok=True)


def _link(source: Path, target: Path) -> None:
    """link(2): atomic, and refuses an existing name; on file systems without hard links, a
    rename after a check (the one place a race remains)."""
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if target.exists():
            raise FileExistsError(errno.EEXIST, "exists", str(target)) from None
        os.rename(source, target)


def _held_by_this_process(path: Path) -> StoreLock | None:
    try:
        key = _key(os.stat(path))
    except OSError:
        return None
    with _HELD_GUARD:
        lock = _HELD.get(key)
        if lock is not None:
            lock.users += 1
        return lock


def _register(lock: StoreLock) -> StoreLock:
    with _HELD_GUARD:
        _HELD[lock.key] = lock
    return lock


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _key(stat: os.stat_result) -> tuple[int, int]:
    return (stat.st_dev, stat.st_ino)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return _key(os.stat(path)) == _key(os.fstat(fd)) and os.fstat(fd).st_nlink > 0
    except OSError:
        return False


def lock_holder(fd: int) -> str:
    """`process PID (its command line)` holding the flock on fd's file, from /proc/locks."""
    stat = os.fstat(fd)
    wanted = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == wanted:
            return describe_process(int(fields[4]))
    return "another process"


def describe_process(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"process {pid}"
    words = [word.decode(errors="replace") for word in raw.split(b"\0") if word]
    if len(words) > 2 and words[1:3] == ["-m", "detector"]:
        words = ["planshift", *words[3:]]
    elif words and Path(words[0]).name.startswith("python") and len(words) > 1:
        words = words[1:]
    command = " ".join(Path(words[0]).name if i == 0 else w for i, w in enumerate(words))
    return f"process {pid} ({' '.join(command.split())[:120]})"
