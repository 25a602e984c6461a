"""How soon does a restarted askhuman finish what a killed one left? (kill -9, Slack, SQLite)

Each round starts the real app in its own process (``tests.slack.click_child``, the
``serve`` app under uvicorn), posts a card through ``/askhuman run``, clicks Approve,
and kills the process with SIGKILL at a chosen moment; then it starts a new process
on the same database and measures, from the kill and from the moment the new process
answers ``/healthz``:

- ``click``: the click was acknowledged, not yet decided → the decision is applied,
  then the run's final answer reaches Slack;
- ``outbox``: decided and resumed, but the card update and the final answer were in
  flight → both reach Slack;
- ``resume``: decided, the resume was running → the final answer reaches Slack.

This process plays Slack (the fake Web API) and the clicker, on 127.0.0.1. Rounds of
the scenarios are interleaved. ``--root`` runs another checkout's app (an older
commit, for a before/after figure; only ``click`` works there).

    python benchmarks/recovery.py --rounds 5 [--scenarios click,outbox,resume] [--root DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")

import httpx  # noqa: E402

from storage import Database, HumanRequest, OutboxItem, ResumeJob  # noqa: E402
from tests.fakes.asgi_server import free_port  # noqa: E402
from tests.fakes.slack_api import FakeSlackAPI  # noqa: E402
from tests.slack.conftest import ALICE, APPROVALS, ORIGIN, Slack  # noqa: E402
from tests.slack.test_click_durability import _count, _new_card  # noqa: E402

FLAGS = {"click": ("--hang",), "outbox": ("--hang-outbox",), "resume": ("--hang-resume",)}


def _spawn(root: Path, port: int, db_url: str, api_url: str, *flags: str
           ) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "ASKHUMAN_"))}
    env["PYTHONPATH"] = str(root)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.slack.click_child", str(port), db_url, api_url, *flags],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _healthy(url: str) -> None:
    async with httpx.AsyncClient() as http:
        while True:
            try:
                if (await http.get(url + "/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.02)


async def _until(check: Callable[[], bool], limit: float = 120) -> float:
    while not check():
        await asyncio.sleep(0.02)
        limit -= 0.02
        if limit <= 0:
            raise TimeoutError("never happened")
    return time.monotonic()


def _answered(fake: FakeSlackAPI) -> bool:
    return any(m.channel == ORIGIN and m.thread_ts for m in fake.messages.values())


def _card_updated(fake: FakeSlackAPI) -> bool:
    return any(c.body.get("channel") == APPROVALS for c in fake.calls_to("chat.update"))


async def one_round(root: Path, scenario: str) -> dict[str, float]:
    """Kill at the scenario's moment, restart, return the seconds to each milestone."""
    with tempfile.TemporaryDirectory() as tmp, FakeSlackAPI() as fake:
        db_url = f"sqlite:///{tmp}/crash.db"
        database = Database(db_url)
        fake.add_users([ALICE, "U0STARTER"])
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        first = _spawn(root, port, db_url, fake.base_url, *FLAGS[scenario])
        try:
            await _healthy(url)
            async with httpx.AsyncClient(timeout=10) as http:
                slack = Slack(url=url, fake=fake, engine=None, database=None,  # type: ignore[arg-type]
                              http=http)
                ts = await _new_card(slack)
                await slack.interact(slack.click_payload(ts, "Approve", ALICE))
                if scenario == "outbox":
                    await _until(lambda: _count(database, OutboxItem,
                                                OutboxItem.kind == "post_run_result") == 1)
                elif scenario == "resume":
                    await _until(lambda: _count(database, ResumeJob,
                                                ResumeJob.state == "running") == 1)
                first.send_signal(signal.SIGKILL)
                killed = time.monotonic()
        finally:
            first.kill()
            first.wait(10)
        second = _spawn(root, port, db_url, fake.base_url)
        try:
            await _healthy(url)
            up = time.monotonic()
            applied = await _until(lambda: _count(database, HumanRequest,
                                                  HumanRequest.status == "submitted") == 1)
            done = await _until(lambda: _answered(fake) and _card_updated(fake))
        finally:
            second.terminate()
            second.wait(20)
            database.dispose()
    return {"restart took": up - killed, "applied after up": max(0.0, applied - up),
            "all told after up": done - up, "all told after kill": done - killed}


def _table(results: dict[str, list[dict[str, float]]]) -> None:
    print(f"{'scenario':8} {'figure':22} {'median s':>9} {'max s':>7}  rounds")
    for scenario, rounds in results.items():
        for figure in rounds[0]:
            values = [r[figure] for r in rounds]
            print(f"{scenario:8} {figure:22} {statistics.median(values):9.2f} "
                  f"{max(values):7.2f}  {len(values)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default="click,outbox,resume")
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args()
    scenarios = args.scenarios.split(",")
    results: dict[str, list[dict[str, float]]] = {s: [] for s in scenarios}
    for n in range(args.rounds):
        for scenario in scenarios:  # interleaved
            results[scenario].append(await one_round(args.root, scenario))
            print(f"round {n + 1} {scenario}: " + ", ".join(
                f"{k} {v:.2f}" for k, v in results[scenario][-1].items()), flush=True)
    _table(results)


if __name__ == "__main__":
    asyncio.run(main())
