"""Child side of the crash tests: ``askhuman serve``'s app as a real process (not a test).

    python -m tests.slack.click_child PORT DB_URL SLACK_API_URL [--hang] [--hang-start]
        [--hang-leg] [--hang-outbox] [--hang-resume] [--lease SECONDS]

``--hang`` makes every decision of a stored click hang after the ack (the test kills
the process with SIGKILL the moment its 200 arrives, so nothing can decide in between);
``--hang-start`` does the same for a stored run start (nothing runs after the ack), and
``--hang-leg`` lets the start run but hangs the agent's first model call;
``--hang-outbox`` leaves every card update and final answer the process commits in
flight, and ``--hang-resume`` every resume it claims, so a kill catches them mid-way;
``--lease`` shortens how long a stored click or start stays with this process.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
from types import SimpleNamespace
from typing import Any

import uvicorn

from bot.commands.serve_cmd import build_app, start_platforms
from bot.engine import Engine
from storage import Database
from tests.fakes.slack_api import BOT_TOKEN
from tests.slack.conftest import SIGNING_SECRET, make_settings


def main(argv: list[str]) -> None:
    port, db_url, api_url = int(argv[0]), argv[1], argv[2]
    settings = make_settings(db_url)
    database = Database(db_url)
    database.upgrade()
    engine = Engine(database, settings)
    if "--lease" in argv:
        lease = dt.timedelta(seconds=float(argv[argv.index("--lease") + 1]))
        engine.tuning.click_lease = engine.tuning.lease = lease

    async def hang(*_args: Any, **_kwargs: Any) -> Any:
        await asyncio.sleep(3600)

    if "--hang" in argv:
        engine.decide_click = hang
    if "--hang-start" in argv:
        engine.run_start = hang
    if "--hang-leg" in argv:
        engine.runtimes.built["deploy"] = SimpleNamespace(run=hang)
    if "--hang-outbox" in argv:
        send = engine.outbox.dispatch

        async def hang_after_decisions(claim: Any) -> None:
            if claim.kind in ("update_card", "post_run_result"):
                await hang()
            else:
                await send(claim)

        engine.outbox.dispatch = hang_after_decisions  # type: ignore[method-assign]
    if "--hang-resume" in argv:
        engine.resumes.process = hang  # type: ignore[method-assign]
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
           "SLACK_API_URL": api_url}
    os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")
    app = build_app(engine, start_platforms(engine, settings, env))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1:])
