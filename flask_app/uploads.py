"""GourmetGram's upload folder, kept within a bound: a size and a count, whichever is reached first.

- An upload is written under a temporary dot-name, then linked into place under a name of its own
  (``<arrival time in ns>-<random hex>.<ext>``; a link never replaces a file) and the temporary name
  removed. A full disk (ENOSPC, EDQUOT) leaves no half-written photo and raises :class:`DiskFull`.
- The folder's files and bytes, and how many uploads were stored and removed, live in a small state
  file beside the folder (``uploads.state.json`` next to ``uploads/``), read and changed under an
  exclusive ``flock``: every thread of every gunicorn worker sharing the folder sees one count and one
  order. The link happens under that lock.
- When an upload would take the folder over either bound, the oldest uploads (modification time, then
  name) are removed first, until the folder with it holds at most 90 % of each (a full folder is then
  scanned once per 10 % of it, not at every upload); then it is linked in. So the folder never holds
  more than the bound, and an upload answered 200 is removed only once every older one is gone. Each
  trim is logged and counted (``/metrics``).
- Names starting with a dot are uploads being written, never counted: besides the bound, the disk
  holds at most the uploads in flight.

Why a size and a count, and the defaults: docs/decisions/2026-11-28-gourmetgram-upload-bound.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import logging
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

STATE_SUFFIX = ".state.json"  # the state file: <folder>.state.json, beside the folder
TEMP_PREFIX = ".upload-"
STALE_TEMP_S = 3600.0  # a temporary file this old was left by a crash, not by an upload in flight
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(Exception):
    """The disk holding the upload folder is full: the upload was not kept (nothing of it is left)."""


@dataclass
class Usage:
    """The folder as the state file counts it: what it holds, and what was stored and removed."""

    files: int = 0
    bytes: int = 0
    stored: int = 0
    removed: int = 0
    removed_bytes: int = 0
    disk_full: int = 0


class UploadFolder:
    """``folder`` kept within ``max_bytes`` and ``max_files``; trims are logged to ``log``."""

    def __init__(self, folder: Path, max_bytes: int, max_files: int, log: logging.Logger) -> None:
        self.folder = Path(folder)
        self.state_path = self.folder.parent / f"{self.folder.name}{STATE_SUFFIX}"
        self.max_bytes, self.max_files = max_bytes, max_files
        self.trim_bytes = max_bytes - max_bytes // 10
        self.trim_files = max(1, max_files - max_files // 10)
        self.log = log

    def open(self) -> Usage:
        """Create the folder, remove a crash's temporary files, recount, and trim if over the bound
        (a bound lowered since the last start is applied here). Raises OSError if it cannot write."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._state() as usage:
            self._drop_stale_temps()
            self._recount(usage)
            if self._over(usage, 0, 0):
                self._trim(usage, 0, 0)
            return dataclasses.replace(usage)

    def save(self, data: bytes, suffix: str) -> Path:
        """Store ``data`` under a fresh name, first removing the oldest uploads if it would take the
        folder over its bound. Raises :class:`DiskFull` on a full disk, OSError on another write error."""
        name = f"{time.time_ns()}-{uuid.uuid4().hex}{suffix}"
        path, temp = self.folder / name, self.folder / f"{TEMP_PREFIX}{name}"
        try:
            made = not self.folder.is_dir()  # removed by hand while the app runs: made again, recounted
            self.folder.mkdir(parents=True, exist_ok=True)
            self._write(temp, data)
            failed: OSError | None = None
            with self._state() as usage:
                if made:
                    self._recount(usage)
                if self._over(usage, 1, len(data)):
                    self._trim(usage, 1, len(data))
                try:
                    os.link(temp, path)
                except OSError as exc:  # raised once the trim above is counted
                    failed = exc
                else:
                    usage.files += 1
                    usage.bytes += len(data)
                    usage.stored += 1
            if failed is not None:
                raise failed
            with contextlib.suppress(OSError):
                temp.unlink()
        except OSError as exc:
            with contextlib.suppress(OSError):
                temp.unlink()
            if path.exists():  # stored; only the count failed (the next trim's scan recounts)
                self.log.warning("%s was stored but not counted: %s", name, exc)
                return path
            if exc.errno in DISK_FULL:
                self._count_disk_full()
                raise DiskFull(f"{self.folder}: {os.strerror(exc.errno)}") from None
            raise
        return path

    def usage(self) -> Usage:
        """The state file's counts (read under a shared lock: a consistent view between two uploads)."""
        try:
            with self.state_path.open() as handle:
                fcntl.flock(handle, fcntl.LOCK_SH)
                usage = _parse(handle.read())
        except OSError:
            usage = None
        if usage is None:  # no state yet, or unreadable: count what is there
            usage = Usage()
            self._recount(usage)
        return usage

    def describe(self) -> str:
        """``1024 MB and 20,000 files``: the bound as the README and the logs say it."""
        return f"{self.max_bytes / 2**20:g} MB and {self.max_files:,} files"

    # ------------------------------------------------------------------------------------ internals
    def _write(self, temp: Path, data: bytes) -> None:
        with temp.open("xb") as handle:
            handle.write(data)

    @contextlib.contextmanager
    def _state(self) -> Iterator[Usage]:
        """The folder's counts under an exclusive lock; written back if the block changed them."""
        fd = os.open(self.state_path, os.O_RDWR | os.O_CREAT, 0o644)
        with os.fdopen(fd, "r+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            text = handle.read()
            usage = _parse(text)
            if usage is None:
                if text:
                    self.log.warning("%s was unreadable; recounted the upload folder", self.state_path)
                usage = Usage()
                self._recount(usage)
            before = dataclasses.replace(usage)
            yield usage
            if usage != before:
                try:
                    handle.seek(0)
                    handle.write(json.dumps(dataclasses.asdict(usage)))
                    handle.truncate()
                    handle.flush()
                except OSError as exc:  # the next reader finds it stale or unreadable and recounts
                    self.log.warning("could not write %s: %s", self.state_path, exc)

    def _entries(self) -> list[tuple[int, str, int]]:
        """``(modification time ns, name, bytes)`` of every upload, oldest first."""
        found = []
        with os.scandir(self.folder) as scan:
            for entry in scan:
                if entry.name.startswith("."):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    if entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        found.append((st.st_mtime_ns, entry.name, st.st_size))
        return sorted(found)

    def _recount(self, usage: Usage) -> list[tuple[int, str, int]]:
        entries = self._entries()
        usage.files, usage.bytes = len(entries), sum(size for _, _, size in entries)
        return entries

    def _over(self, usage: Usage, files: int, size: int) -> bool:
        """Would ``files`` more files of ``size`` bytes take the folder over its bound?"""
        return usage.files + files > self.max_files or usage.bytes + size > self.max_bytes

    def _trim(self, usage: Usage, files: int, size: int) -> None:
        """Remove the oldest uploads until the folder, with ``files`` more of ``size`` bytes, holds at
        most 90 % of each bound."""
        removed: list[tuple[int, int]] = []
        for mtime, name, size_on_disk in self._recount(usage):
            if usage.files + files <= self.trim_files and usage.bytes + size <= self.trim_bytes:
                break
            try:
                os.unlink(self.folder / name)
            except FileNotFoundError:  # someone else removed it: gone, but not by this trim
                pass
            except OSError as exc:
                self.log.error("could not remove %s (%s); the upload folder stays over its bound",
                               name, exc)
                break
            else:
                removed.append((mtime, size_on_disk))
            usage.files -= 1
            usage.bytes -= size_on_disk
        usage.removed += len(removed)
        usage.removed_bytes += sum(size for _, size in removed)
        if removed:
            span = " to ".join(datetime.fromtimestamp(removed[i][0] / 1e9).strftime("%Y-%m-%d %H:%M:%S")
                               for i in (0, -1))
            self.log.info("removed the %d oldest (%.2f MB, stored %s) to keep %s within %s; "
                          "left: %d files, %.2f MB", len(removed), sum(s for _, s in removed) / 2**20,
                          span, self.folder, self.describe(), usage.files, usage.bytes / 2**20)

    def _drop_stale_temps(self) -> None:
        cutoff = time.time() - STALE_TEMP_S
        for temp in self.folder.glob(f"{TEMP_PREFIX}*"):
            with contextlib.suppress(OSError):
                if temp.stat().st_mtime < cutoff:
                    temp.unlink()
                    self.log.warning("removed %s, left half-written by an earlier crash", temp.name)

    def _count_disk_full(self) -> None:
        with contextlib.suppress(OSError), self._state() as usage:
            usage.disk_full += 1


def _parse(text: str) -> Usage | None:
    try:
        return Usage(**{key: int(value) for key, value in json.loads(text).items()})
    except (ValueError, TypeError, AttributeError):
        return None


METRICS = (  # (name, type, help, Usage field): Prometheus' text format, written out below
    ("gourmetgram_uploads_files", "gauge", "Uploads kept in the upload folder.", "files"),
    ("gourmetgram_uploads_bytes", "gauge", "Bytes of the uploads kept in the upload folder.", "bytes"),
    ("gourmetgram_uploads_stored_total", "counter", "Uploads stored since the folder's state began.",
     "stored"),
    ("gourmetgram_uploads_removed_total", "counter",
     "Uploads removed, oldest first, to keep the folder within its bound.", "removed"),
    ("gourmetgram_uploads_removed_bytes_total", "counter", "Bytes of the uploads removed to keep the bound.",
     "removed_bytes"),
    ("gourmetgram_uploads_disk_full_total", "counter", "Uploads refused (507) because the disk was full.",
     "disk_full"),
)


def metrics_text(folder: UploadFolder) -> str:
    """``/metrics`` in Prometheus' text format, from the shared state: every worker answers the same
    numbers (prometheus_client's registry is per process, so one worker would report its own share)."""
    usage = folder.usage()
    lines = []
    for name, kind, text, field in METRICS:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name} {getattr(usage, field)}"]
    for name, value, text in (("gourmetgram_uploads_max_bytes", folder.max_bytes, "UPLOADS_MAX_MB in bytes."),
                              ("gourmetgram_uploads_max_files", folder.max_files, "UPLOADS_MAX_FILES.")):
        lines += [f"# HELP {name} The upload folder's bound: {text}", f"# TYPE {name} gauge",
                  f"{name} {value}"]
    return "\n".join(lines) + "\n"
