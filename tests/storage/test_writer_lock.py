"""SQLite writers of several processes queue on one ``flock`` beside the database
(``storage.db.WriterLock``), held from ``BEGIN IMMEDIATE`` to ``COMMIT``: a process
waiting for it is woken by the kernel when the holder commits, or is killed."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from storage import Database

ROOT = Path(__file__).resolve().parents[2]

HOLDER = """
import sys, time
from sqlalchemy import text
from storage import Database
db = Database(sys.argv[1])
with db.transaction() as session:
    session.execute(text("INSERT INTO t VALUES (1)"))
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(url: str, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, url, str(seconds)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
    return proc


def _locked(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    database = Database(url)
    with database.transaction() as session:
        session.execute(text("CREATE TABLE t (n INTEGER)"))
    database.dispose()
    return url


def test_another_processes_write_transaction_holds_the_lock_until_it_commits(
    url: str, tmp_path: Path,
) -> None:
    holder = _holder(url, 1.0)
    assert _locked(tmp_path / "a.db-writer")
    database = Database(url)
    try:
        with database.transaction() as session:  # waits for the holder's commit
            assert session.execute(text("SELECT count(*) FROM t")).scalar_one() == 1
            session.execute(text("INSERT INTO t VALUES (2)"))
    finally:
        database.dispose()
    holder.communicate(timeout=10)
    assert holder.returncode == 0
    assert not _locked(tmp_path / "a.db-writer")


def test_a_killed_holder_releases_the_lock(url: str, tmp_path: Path) -> None:
    holder = _holder(url, 3600)
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=10)
    database = Database(url)
    try:
        with database.transaction() as session:  # its transaction never committed
            assert session.execute(text("SELECT count(*) FROM t")).scalar_one() == 0
    finally:
        database.dispose()
