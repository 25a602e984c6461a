"""``/metrics`` of ``askhuman serve --workers 2`` (real processes): one scrape, answered
by whichever worker accepts it, shows what every worker observed (prometheus_client's
multiprocess mode, ``bot.metrics.use_multiprocess``), and still does after a worker is
killed with SIGKILL: its counts stay in the sum, and the replacement's are added.

It is served on ``metrics.port``, which the arbiter binds once and every worker serves
on (``bot.commands.shared_metrics``); on the main port it is the same registry."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from storage import AuditLog, Database
from tests.fakes.asgi_server import free_port
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import ALICE, Slack
from tests.slack.workers_harness import (
    askhuman,
    cards,
    click_holders,
    client,
    count,
    decided,
    fake_slack,
    live_instances,
    pinned,
    post_cards,
    settled,
    slack_env,
    stop,
    until,
    wait_healthy,
    write_config,
)


def total(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples
               if sample.name == name and labels.items() <= sample.labels.items())


async def scrape(url: str) -> str:
    """One scrape on a connection of its own (so the kernel picks the worker)."""
    async with httpx.AsyncClient(timeout=10) as http:
        reply = await http.get(url + "/metrics")
    assert reply.status_code == 200, reply.text
    return reply.text


async def scrape_each(url: str, database: Database, fake: FakeSlackAPI) -> list[str]:
    """One scrape answered by each live worker (a connection pinned to it)."""
    pids = [pid for _, pid in live_instances(database)]
    async with pinned(url, fake, pids, 1, path="/metrics") as clients:
        replies = [await c.http.get(url + "/metrics") for c in clients]
    assert [r.status_code for r in replies] == [200] * len(pids)
    return [r.text for r in replies]


async def click_all(slack: Slack, ts_list: list[str]) -> None:
    """Alice approves every card at once."""
    replies = await asyncio.gather(*(slack.interact(slack.click_payload(ts, "Approve", ALICE))
                                     for ts in ts_list))
    assert [r.status_code for r in replies] == [200] * len(ts_list)


async def more_cards(slack: Slack, database: Database, n: int, old: list[str]) -> list[str]:
    """Start ``n`` more runs; the ts of their cards (delivery stored, as ``post_cards``)."""
    for i in range(n):
        assert (await slack.command(f"run deploy ship v10.{i}.0")).status_code == 200
    want = len(old) + n
    await until(lambda: len(cards(slack.fake)) >= want and count(
        database, AuditLog, AuditLog.event == "delivered") >= want, 30, f"{n} more cards")
    return sorted(set(cards(slack.fake)) - set(old))


async def clicks_on_both_workers(slack: Slack, database: Database) -> list[str]:
    """Alice approves ten cards at once, five through each worker (``pinned``
    connections), and every click is decided. The ts of every card clicked."""
    ts_list = await post_cards(slack, 10, database)
    pids = [pid for _, pid in live_instances(database)]
    async with pinned(slack.url, slack.fake, pids, 5) as slacks:
        replies = await asyncio.gather(*(
            slacks[n % len(slacks)].interact(slack.click_payload(ts, "Approve", ALICE))
            for n, ts in enumerate(ts_list)))
    assert [r.status_code for r in replies] == [200] * len(ts_list)
    await until(lambda: decided(database) == len(ts_list) and settled(database), 30,
                "every click decided")
    assert click_holders(database) == {i for i, _ in live_instances(database)}
    return ts_list


def assert_sums(text: str, clicks: int, fake: FakeSlackAPI) -> None:
    """Every click, decision and resume, and every ``chat.postMessage`` (cards and
    final answers, whichever worker delivered them) that any worker made is in this one
    scrape."""
    assert total(text, "askhuman_slack_clicks_total") == clicks
    assert total(text, "askhuman_click_ack_seconds_count", platform="slack") == clicks
    assert total(text, "askhuman_time_to_decision_seconds_count", route="ops") == clicks
    assert total(text, "askhuman_answer_to_resume_seconds_count") == clicks
    assert total(text, "askhuman_platform_api_calls_total", platform="slack",
                 method="chat.postMessage") == len(fake.calls_to("chat.postMessage"))
    assert total(text, "askhuman_pending_requests") == 0  # read from the database


async def test_one_scrape_sums_every_worker_and_survives_kill_9(tmp_path: Path) -> None:
    """On SQLite only: the metrics' files do not depend on the database (the guarantees
    on both are ``test_workers``'s)."""
    db_url = f"sqlite:///{tmp_path / 'askhuman.db'}"
    database = Database(db_url)
    port, metrics_port = free_port(), free_port()
    with fake_slack() as fake:
        config = write_config(tmp_path, db_url)
        values = yaml.safe_load(config.read_text())
        config.write_text(yaml.safe_dump(
            {**values, "metrics": {"enabled": True, "port": metrics_port}}))
        temp = tmp_path / "tmp"  # where the arbiter makes its private directory
        temp.mkdir()
        proc = askhuman(["serve", "--config", str(config), "--port", str(port),
                         "--workers", "2", "--log-level", "warning"],
                        slack_env(fake, TMPDIR=str(temp)))
        try:
            url = f"http://127.0.0.1:{port}"
            await wait_healthy(url, proc)
            await until(lambda: len(live_instances(database)) == 2, 60, "2 workers beating")
            (private,) = temp.glob("askhuman-metrics-*")
            assert stat.S_IMODE(private.stat().st_mode) == 0o700
            metrics_url = f"http://127.0.0.1:{metrics_port}"
            async with client(url, fake) as slack:
                ts_list = await clicks_on_both_workers(slack, database)
                clicks = len(ts_list)
                for text in await scrape_each(metrics_url, database, fake):
                    assert_sums(text, clicks, fake)

                victim_id, victim = live_instances(database)[0]
                os.kill(victim, signal.SIGKILL)
                assert_sums(await scrape(metrics_url), clicks, fake)  # the dead worker's stay
                await until(lambda: victim_id not in {i for i, _ in live_instances(database)}
                            and len(live_instances(database)) == 2, 30,
                            "the victim reaped and replaced")
                await click_all(slack, await more_cards(slack, database, 3, ts_list))
                await until(lambda: decided(database) == clicks + 3 and settled(database), 30,
                            "the new clicks decided")
                for text in await scrape_each(metrics_url, database, fake):
                    assert_sums(text, clicks + 3, fake)  # the replacement's, added
                assert (await slack.http.get(url + "/metrics")).status_code == 404
        finally:
            tail = stop(proc)
            database.dispose()
        assert proc.returncode == 0, tail
        assert not list(temp.iterdir()), "the private directory was left behind"
