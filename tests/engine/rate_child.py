"""A replica spending one API client's tokens as fast as it can (``test_rate_limits``).

    python -m tests.engine.rate_child DB_URL CLIENT_ID PER_MINUTE ATTEMPTS GO_FILE

Says it is ready (``GO_FILE.ready.<pid>``), waits for ``GO_FILE`` (so both children
start together), makes ``ATTEMPTS`` takes,
each in its own transaction like the API does, and prints how many were granted.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from bot.engine.rate_limits import take
from storage import Database


def main() -> None:
    url, client_id, per_minute, attempts, go = sys.argv[1:6]
    database = Database(url)
    postgres = database.is_postgres
    Path(f"{go}.ready.{os.getpid()}").touch()
    while not Path(go).exists():
        time.sleep(0.005)
    granted = 0
    for _ in range(int(attempts)):
        with database.transaction() as session:
            wait = take(session, int(client_id), int(per_minute), postgres,
                        None if postgres else time.time())
        granted += wait == 0.0
    database.dispose()
    print(granted)


if __name__ == "__main__":
    main()
