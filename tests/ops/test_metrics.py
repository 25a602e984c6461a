"""``/metrics``: off by default; on the main app or its own port; moves as clicks arrive."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from bot import metrics
from bot.settings import Settings
from storage import Database, HumanRequest
from tests.api.conftest import running_door
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI
from tests.ops.conftest import ops_config
from tests.ops.test_admin_cli import run_row, start, wait_for
from tests.slack.conftest import MALLORY


def sample(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 if none)."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


async def scrape(http: httpx.AsyncClient, url: str) -> str:
    response = await http.get(url + "/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


def settings_with(tmp_path: Path, metrics: dict[str, Any]) -> Settings:
    values = ops_config(f"sqlite:///{tmp_path / 'askhuman.db'}")
    values["metrics"] = metrics
    return Settings.model_validate(values)


async def test_metrics_move_as_clicks_arrive(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    async with running_door(fake_slack, fake_feishu,
                            settings_with(tmp_path, {"enabled": True})) as ops:
        before = await scrape(ops.http, ops.url)
        clicks0 = sample(before, "askhuman_click_ack_seconds_count", platform="slack")
        decided0 = sample(before, "askhuman_time_to_decision_seconds_count", route="ops",
                          outcome="submitted")
        resumed0 = sample(before, "askhuman_answer_to_resume_seconds_count")
        posts0 = sample(before, "askhuman_platform_api_calls_total", platform="slack",
                        method="chat.postMessage", status="ok")
        assert sample(before, "askhuman_pending_requests", route="ops") == 0

        _, ts = await start(ops)
        waiting = await scrape(ops.http, ops.url)
        assert sample(waiting, "askhuman_pending_requests", route="ops") == 1
        assert sample(waiting, "askhuman_platform_api_calls_total", platform="slack",
                      method="chat.postMessage", status="ok") > posts0
        assert sample(waiting, "askhuman_platform_api_calls_total", platform="feishu",
                      status="ok") >= 1

        await ops.slack.interact(ops.slack.click_payload(ts, "Approve", MALLORY))
        refused = await scrape(ops.http, ops.url)
        assert sample(refused, "askhuman_click_ack_seconds_count", platform="slack") \
            == clicks0 + 1
        assert sample(refused, "askhuman_pending_requests", route="ops") == 1

        await ops.approve_in_slack(ts)
        await wait_for(lambda: run_row(ops).status == "succeeded", "the run to finish")
        after = await scrape(ops.http, ops.url)
        assert sample(after, "askhuman_click_ack_seconds_count", platform="slack") \
            == clicks0 + 2
        assert sample(after, "askhuman_pending_requests", route="ops") == 0
        assert sample(after, "askhuman_decisions_total", outcome="submitted",
                      platform="slack", route="ops") == 1
        assert sample(after, "askhuman_time_to_decision_seconds_count", route="ops",
                      outcome="submitted") == decided0 + 1
        assert sample(after, "askhuman_answer_to_resume_seconds_count") == resumed0 + 1
        final = await scrape(ops.http, ops.url)
        assert "askhuman_outbox_backlog" in final
        assert "askhuman_outbox_oldest_age_seconds" in final


async def test_metrics_are_off_unless_enabled_and_can_have_their_own_port(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    async with running_door(fake_slack, fake_feishu, settings_with(tmp_path, {})) as off:
        assert (await off.http.get(off.url + "/metrics")).status_code == 404
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = settings_with(tmp_path, {"enabled": True, "port": port})
    async with running_door(fake_slack, fake_feishu, settings) as own:
        assert (await own.http.get(own.url + "/metrics")).status_code == 404
        text = ""
        for _ in range(100):  # the port's server starts with the app's lifespan
            try:
                text = await scrape(own.http, f"http://127.0.0.1:{port}")
                break
            except httpx.TransportError:
                await asyncio.sleep(0.05)
        assert "askhuman_pending_requests" in text and "askhuman_outbox_backlog" in text


def test_bad_metrics_config_names_the_key(tmp_path: Path) -> None:
    from bot.settings import ConfigError, load_settings

    path = tmp_path / "askhuman.yaml"
    values = ops_config("sqlite:///x.db")
    values["metrics"] = {"enabled": True, "port": 70000}
    path.write_text(yaml.safe_dump(values))
    try:
        load_settings(path)
    except ConfigError as exc:
        assert "metrics.port" in str(exc)
    else:
        raise AssertionError("port 70000 was accepted")



async def test_pending_gauges_say_how_old_and_how_far_past_escalation(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], db_url: str
) -> None:
    """Read after the app stopped, so no sweep escalates or expires the request while the
    test moves its clocks: two hours old, escalated an hour ago, and the next step ten
    minutes overdue; then timed out, which counts as a ``timeout`` decision of its route."""
    values = ops_config(db_url)
    values["metrics"] = {"enabled": True}
    async with running_door(fake_slack, fake_feishu, Settings.model_validate(values)) as ops:
        ref, _ = await start(ops)
    database = Database(db_url)
    try:
        registry = metrics.registry_for(database)
        fresh = generate_latest(registry).decode()
        assert sample(fresh, "askhuman_pending_oldest_age_seconds", route="ops") < 60
        assert sample(fresh, "askhuman_pending_escalated_requests", route="ops") == 0
        assert sample(fresh, "askhuman_pending_escalation_overdue_seconds", route="ops") == 0
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        moved = {"created_at": now - dt.timedelta(hours=2),
                 "escalated_at": now - dt.timedelta(hours=1), "escalation_route": "ops",
                 "escalate_at": now - dt.timedelta(minutes=10)}
        with database.transaction() as session:
            session.execute(update(HumanRequest).where(HumanRequest.ref == ref).values(**moved))
        late = generate_latest(registry).decode()
        assert 7200 <= sample(late, "askhuman_pending_oldest_age_seconds", route="ops") < 7300
        assert sample(late, "askhuman_pending_escalated_requests", route="ops") == 1
        assert 600 <= sample(late, "askhuman_pending_escalation_overdue_seconds",
                             route="ops") < 700
        with database.transaction() as session:
            session.execute(update(HumanRequest).where(HumanRequest.ref == ref)
                            .values(status="timeout", decided_at=now))
        done = generate_latest(registry).decode()
        assert sample(done, "askhuman_pending_requests") == 0
        assert sample(done, "askhuman_pending_escalated_requests") == 0
        assert sample(done, "askhuman_decisions_total", outcome="timeout", platform="system",
                      route="ops") == 1
    finally:
        database.dispose()
