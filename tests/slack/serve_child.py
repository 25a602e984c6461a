"""Child process for the kill -9 tests: the Slack app served exactly like ``askhuman
serve`` wires it (run as ``python -m``; not a test module).

    python -m tests.slack.serve_child DB_URL SLACK_API_URL PORT LEASE_SECONDS

Short leases (renewed by the heartbeat) let the surviving replica take over quickly.
"""

from __future__ import annotations

import sys

import uvicorn

from bot.commands.serve_cmd import build_app, start_platforms
from bot.engine.core import Engine
from storage import Database
from tests.fakes.slack_api import BOT_TOKEN
from tests.slack.conftest import SIGNING_SECRET, make_settings


def main(db_url: str, api_url: str, port: int, lease: float) -> None:
    settings = make_settings(db_url)
    database = Database(db_url)
    database.upgrade()
    engine = Engine(database, settings, lease_seconds=lease, outbox_lease_seconds=lease,
                    heartbeat_seconds=lease / 5)
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
           "SLACK_API_URL": api_url}
    app = build_app(engine, start_platforms(engine, settings, env))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
