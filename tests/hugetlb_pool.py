"""Reserving hugetlb pages for a test so that a killed run cannot leave them reserved.

Writing ``nr_hugepages`` outlives the process that wrote it: a test run
killed while it holds pages (a CI timeout, SIGKILL) would leave the pool
raised. So a reservation is recorded first in a marker file (the pool, how
many pages were added, the process and its start time, the boot), and every
reservation begins by undoing the reservations whose process is gone: the
next test run restores what a killed one left. Markers live in
``/run/memlab-hugetlb`` (a tmpfs, gone at reboot as the pool itself is);
a marker of another boot is dropped without touching the pool. A lock file
serialises the read-modify-writes of the pool between test processes, and
a reservation is undone by subtracting what it added (never by writing back
an old value), so that concurrent reservations do not undo each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from pathlib import Path

MARKER_DIR = Path("/run/memlab-hugetlb")


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_start(pid: int) -> str:
    """The start time of a process (clock ticks since boot), '' when it does not run."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text[text.rindex(")") + 2 :].split()[19]


class Pool:
    """One hugetlb pool (its ``nr_hugepages`` file) with the markers of its reservations."""

    def __init__(self, pool: str | os.PathLike, markers: str | os.PathLike = MARKER_DIR):
        self.pool = Path(pool)
        self.markers = Path(markers)

    def read(self) -> int:
        return int(self.pool.read_text())

    def _write(self, pages: int) -> None:
        with open(self.pool, "w") as handle:
            handle.write(str(max(pages, 0)))

    def _marker_dir(self) -> Path | None:
        """The marker directory, created private; None when it cannot be trusted or made."""
        try:
            self.markers.mkdir(mode=0o700, exist_ok=True)
            info = os.lstat(self.markers)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return None
        return self.markers

    @contextlib.contextmanager
    def _locked(self):
        directory = self._marker_dir()
        if directory is None:
            yield None
            return
        with open(directory / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield directory
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _markers(self, directory: Path) -> list[tuple[Path, dict]]:
        found = []
        for path in directory.glob("*.json"):
            try:
                found.append((path, json.loads(path.read_text())))
            except (OSError, ValueError):
                path.unlink(missing_ok=True)
        return found

    def restore_abandoned(self) -> int:
        """Undo the reservations whose process is gone; return how many pages were given back."""
        returned = 0
        with self._locked() as directory:
            if directory is None:
                return 0
            boot = _boot_id()
            for path, marker in self._markers(directory):
                if marker.get("pool") != os.fspath(self.pool):
                    continue
                alive = process_start(int(marker.get("pid", 0))) == marker.get("start")
                if alive and marker.get("boot") == boot:
                    continue
                if marker.get("boot") == boot:
                    added = int(marker.get("added", 0))
                    self._write(self.read() - added)
                    returned += added
                path.unlink(missing_ok=True)
        return returned

    @contextlib.contextmanager
    def reserved(self, wanted: int):
        """Add ``wanted`` pages to the pool for the block; yields how many the kernel added.

        The marker is written before the pool grows and removed after it
        shrinks back, so that a run killed at any point leaves a marker for
        :meth:`restore_abandoned` (at worst one that overstates by the pages
        the kernel did not grant).
        """
        self.restore_abandoned()
        marker = None
        with self._locked() as directory:
            before = self.read()
            if directory is not None:
                marker = directory / f"{os.getpid()}-{process_start(os.getpid())}.json"
                record = {"pool": os.fspath(self.pool), "added": wanted, "pid": os.getpid(),
                          "start": process_start(os.getpid()), "boot": _boot_id()}
                marker.write_text(json.dumps(record))
            self._write(before + wanted)
            added = max(self.read() - before, 0)
            if marker is not None:
                marker.write_text(json.dumps({**record, "added": added}))
        try:
            yield added
        finally:
            with self._locked():
                self._write(self.read() - added)
                if marker is not None:
                    marker.unlink(missing_ok=True)
