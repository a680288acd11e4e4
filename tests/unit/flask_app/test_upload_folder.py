"""GourmetGram's upload folder keeps within its bound, oldest first, with one count for every thread and
process sharing it, and a full disk leaves nothing half-written (flask_app/uploads.py)."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flask_app.uploads import TEMP_PREFIX, DiskFull, UploadFolder, Usage, metrics_text
from servelab.core.paths import REPO_ROOT

LOG = logging.getLogger("test-uploads")


def kept(folder: Path) -> list[Path]:
    """The uploads in ``folder``, oldest first (as the folder orders them), the store's own files apart."""
    found = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name))


def blob(i: int, size: int = 1000) -> bytes:
    return f"upload {i:05d} ".encode().ljust(size, b".")


@pytest.fixture
def uploads(tmp_path: Path) -> Path:
    """The upload folder (its state file goes beside it, in the test's own folder)."""
    folder = tmp_path / "uploads"
    folder.mkdir()
    return folder


def test_oldest_go_first_and_the_folder_never_holds_more_than_its_bound(
        uploads: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = UploadFolder(uploads, max_bytes=10_000, max_files=100, log=LOG)
    folder.open()
    sent = [blob(i) for i in range(40)]
    with caplog.at_level(logging.INFO, logger=LOG.name):
        for i, data in enumerate(sent):
            path = folder.save(data, ".jpg")
            assert path.read_bytes() == data and path.suffix == ".jpg"
            now = [p.read_bytes() for p in kept(uploads)]
            assert sum(map(len, now)) <= 10_000
            assert now == sent[i + 1 - len(now):i + 1], "the newest, in order, with no gap"
    assert len(kept(uploads)) >= 9, "a trim leaves 90 % of the bound, not less"
    usage = folder.usage()
    assert (usage.files, usage.bytes, usage.stored) == (len(now), sum(map(len, now)), 40)
    assert (usage.removed, usage.removed_bytes) == (40 - len(now), (40 - len(now)) * 1000)
    trims = [r.getMessage() for r in caplog.records if "removed the" in r.getMessage()]
    assert trims and "oldest" in trims[0] and "10 files" not in trims[0] and str(uploads) in trims[0]
    # a 10 % trim: one scan per 10 % of the bound, not one per upload
    assert len(trims) <= 40 // 2


def test_the_count_bound_keeps_the_newest_files(uploads: Path) -> None:
    folder = UploadFolder(uploads, max_bytes=10**9, max_files=10, log=LOG)
    folder.open()
    sent = [blob(i, 10) for i in range(25)]
    for data in sent:
        folder.save(data, ".png")
        assert len(kept(uploads)) <= 10
    now = [p.read_bytes() for p in kept(uploads)]
    assert now == sent[-len(now):] and len(now) >= 9
    assert folder.usage().removed == 25 - len(now)


def test_one_file_bound_keeps_the_newest(uploads: Path) -> None:
    folder = UploadFolder(uploads, max_bytes=10**6, max_files=1, log=LOG)
    folder.open()
    for i in range(3):
        folder.save(blob(i), ".jpg")
    assert [p.read_bytes() for p in kept(uploads)] == [blob(2)]


def test_a_full_disk_leaves_no_half_written_file(uploads: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = UploadFolder(uploads, max_bytes=10**6, max_files=100, log=LOG)
    folder.open()
    first = folder.save(blob(0), ".jpg")

    def half_then_full(self: UploadFolder, temp: Path, data: bytes) -> None:
        temp.write_bytes(data[:len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(temp))

    monkeypatch.setattr(UploadFolder, "_write", half_then_full)
    with pytest.raises(DiskFull, match="No space left"):
        folder.save(blob(1), ".jpg")
    assert [p.name for p in uploads.iterdir()] == [first.name]
    assert folder.usage() == Usage(files=1, bytes=1000, stored=1, disk_full=1)


def test_another_write_error_is_raised_and_leaves_nothing(uploads: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    folder = UploadFolder(uploads, max_bytes=10**6, max_files=100, log=LOG)
    folder.open()

    def refused(self: UploadFolder, temp: Path, data: bytes) -> None:
        temp.write_bytes(b"x")
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(temp))

    monkeypatch.setattr(UploadFolder, "_write", refused)
    with pytest.raises(OSError, match="Input/output") as raised:
        folder.save(blob(0), ".jpg")
    assert not isinstance(raised.value, DiskFull)
    assert list(uploads.iterdir()) == []


def test_a_lowered_bound_applies_at_start_and_a_crashs_temporary_files_go(uploads: Path) -> None:
    big = UploadFolder(uploads, max_bytes=10**6, max_files=100, log=LOG)
    big.open()
    for i in range(20):
        big.save(blob(i), ".jpg")
    stale, fresh = uploads / f"{TEMP_PREFIX}old.jpg", uploads / f"{TEMP_PREFIX}in-flight.jpg"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    small = UploadFolder(uploads, max_bytes=10**6, max_files=5, log=LOG)
    usage = small.open()
    assert [p.read_bytes() for p in kept(uploads)] == [blob(i) for i in range(15, 20)]
    assert (usage.files, usage.stored, usage.removed) == (5, 20, 15)
    assert not stale.exists() and fresh.exists(), "only a temporary file older than an upload can take"


def test_an_unreadable_state_is_recounted(uploads: Path) -> None:
    folder = UploadFolder(uploads, max_bytes=10**6, max_files=100, log=LOG)
    folder.open()
    for i in range(3):
        folder.save(blob(i), ".jpg")
    folder.state_path.write_text("{half a st")
    assert (folder.usage().files, folder.usage().bytes) == (3, 3000)
    folder.save(blob(3), ".jpg")
    assert (folder.usage().files, folder.usage().bytes) == (4, 4000)


WORKER = """
import logging, random, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from flask_app.uploads import UploadFolder
folder = UploadFolder(Path(sys.argv[1]), max_bytes=20_000, max_files=12, log=logging.getLogger("w"))
folder.open()
def save(i):
    data = f"{sys.argv[2]}-{i} ".encode().ljust(random.randint(500, 1500), b".")
    folder.save(data, ".jpg")
with ThreadPoolExecutor(4) as pool:
    list(pool.map(save, range(40)))
"""


def test_threads_of_several_processes_share_one_count_and_one_bound(uploads: Path) -> None:
    """Two processes of four threads each (as gunicorn's workers): the folder ends within its bound, the
    shared count is the folder's own, and every upload is counted once."""
    runs = [subprocess.Popen([sys.executable, "-c", WORKER, str(uploads), f"p{n}"], cwd=REPO_ROOT)
            for n in range(2)]
    assert [run.wait(120) for run in runs] == [0, 0]
    files = kept(uploads)
    assert len(files) <= 12 and sum(p.stat().st_size for p in files) <= 20_000
    usage = UploadFolder(uploads, 20_000, 12, LOG).usage()
    assert (usage.files, usage.bytes) == (len(files), sum(p.stat().st_size for p in files))
    assert usage.stored == 80 and usage.removed == 80 - len(files)
    assert not [p for p in uploads.iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_metrics_are_the_shared_counts_in_prometheus_text(uploads: Path) -> None:
    folder = UploadFolder(uploads, max_bytes=2500, max_files=100, log=LOG)
    folder.open()
    for i in range(4):
        folder.save(blob(i), ".jpg")
    values = {line.split()[0]: float(line.split()[1])
              for line in metrics_text(folder).splitlines() if not line.startswith("#")}
    assert values == {"gourmetgram_uploads_files": 2, "gourmetgram_uploads_bytes": 2000,
                      "gourmetgram_uploads_stored_total": 4, "gourmetgram_uploads_removed_total": 2,
                      "gourmetgram_uploads_removed_bytes_total": 2000,
                      "gourmetgram_uploads_disk_full_total": 0,
                      "gourmetgram_uploads_max_bytes": 2500, "gourmetgram_uploads_max_files": 100}
    assert "# TYPE gourmetgram_uploads_removed_total counter" in metrics_text(folder)


def test_a_folder_removed_while_running_is_made_again(uploads: Path) -> None:
    import shutil

    folder = UploadFolder(uploads, max_bytes=10**6, max_files=100, log=LOG)
    folder.open()
    folder.save(blob(0), ".jpg")
    shutil.rmtree(uploads)
    folder.save(blob(1), ".jpg")
    assert [p.read_bytes() for p in kept(uploads)] == [blob(1)]
    assert (folder.usage().files, folder.usage().stored) == (1, 2)


def test_a_full_disk_at_the_link_keeps_the_trim_counted(uploads: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The trim that made room is counted even when the new name cannot be written (a full directory)."""
    folder = UploadFolder(uploads, max_bytes=3000, max_files=100, log=LOG)
    folder.open()
    for i in range(3):
        folder.save(blob(i), ".jpg")

    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "link", full)
    with pytest.raises(DiskFull):
        folder.save(blob(3), ".jpg")
    monkeypatch.undo()
    usage = folder.usage()
    assert [p.read_bytes() for p in kept(uploads)] == [blob(2)]
    assert (usage.files, usage.stored, usage.removed, usage.disk_full) == (1, 3, 2, 1)
    assert not [p for p in uploads.iterdir() if p.name.startswith(TEMP_PREFIX)]
