"""The demo's tool: restarts nothing, but leaves a trace anyone can check.

``askhuman demo --agent ops`` calls ``restart_service`` behind an approval. Each
call appends one line to a journal file, so "approve → it ran once" and "reject →
it never ran" can be verified by reading that file.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from pathlib import Path

JOURNAL_ENV = "ASKHUMAN_DEMO_JOURNAL"


def journal_path() -> Path:
    """``$ASKHUMAN_DEMO_JOURNAL``, or ``askhuman-demo-journal.txt`` in the temp dir."""
    return Path(os.environ.get(JOURNAL_ENV) or
                Path(tempfile.gettempdir()) / "askhuman-demo-journal.txt")


def restart_service(service: str, cluster: str, reason: str = "") -> str:
    """Restart one service in a cluster (demo: appends a line to the journal file).

    Args:
        service: The service to restart, e.g. "api".
        cluster: The cluster it runs in (set by the admin, hidden from the model).
        reason: Why it needs a restart.
    """
    path = journal_path()
    stamp = dt.datetime.now(dt.UTC).strftime("%H:%M:%S")
    line = f"{stamp} restarted {service} on {cluster}" + (f" ({reason})" if reason else "")
    with path.open("a", encoding="utf-8") as journal:
        journal.write(line + "\n")
    count = len(path.read_text(encoding="utf-8").splitlines())
    return f"restarted {service} on {cluster}; journal {path} now has {count} line(s)"
