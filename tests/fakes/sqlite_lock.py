"""Hold a SQLite database's write lock from another connection: a busy database."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path


def hold_write_lock(path: Path, seconds: float, held: threading.Event) -> None:
    """Take the write lock (``BEGIN IMMEDIATE``), set ``held``, keep it ``seconds``.

    Run it on a thread: it is what another process holding a long write looks like.
    """
    connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        held.set()
        time.sleep(seconds)
        connection.execute("COMMIT")
    finally:
        connection.close()
