"""How fast does askhuman answer a burst of Feishu card clicks?

Runs everything on 127.0.0.1: the fake Feishu Open API, askhuman's real ``serve``
wiring in HTTP-callback mode (``FEISHU_MODE=http`` with an encrypt key and a
verification token, SQLite in a temp dir, the scripted ``deploy`` agent, uvicorn in
its own thread), and, for comparison, a bare lark-oapi ``EventDispatcherHandler``
behind the same kind of Starlette endpoint (``RawRequest`` -> ``handler.do``) whose
``card.action.trigger`` handler only returns a toast. For each round a message
starts a run and its card is posted; then N concurrent encrypted, signed
``card.action.trigger`` callbacks by N different approvers are fired at each app,
and the time until the toast reply arrives is reported (median, p99, max) with the
ratio between the two, measured in the same run.

    python benchmarks/feishu_ack.py --clicks 100 [--rounds 3]

Feishu's deadline for a callback reply is 3 s; askhuman waits for the engine's
decision (at most 2.5 s) so its toast can say what happened, while the baseline
answers at once. Every reply must be HTTP 200 with a toast, and each round must
decide its request exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import lark_oapi as lark  # noqa: E402
from lark_oapi.core.model import RawRequest  # noqa: E402
from lark_oapi.event.callback.model.p2_card_action_trigger import (  # noqa: E402
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)
from sqlalchemy import func, select  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response  # noqa: E402

from bot.commands.serve_cmd import build_app, start_platforms  # noqa: E402
from bot.engine.core import Engine  # noqa: E402
from bot.platforms.feishu.http import _FORWARDED  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.web import create_app  # noqa: E402
from storage import AuditLog, Database, Delivery, HumanRequest  # noqa: E402
from tests.fakes.asgi_server import AsgiServer  # noqa: E402
from tests.fakes.feishu_api import FakeFeishuApi, Message  # noqa: E402
from tests.fakes.feishu_signing import (  # noqa: E402
    SignedRequest,
    bot_mention,
    card_action_event,
    message_event,
    sign_event,
)

ENCRYPT_KEY = "bench-encrypt-key"
VERIFICATION_TOKEN = "bench-verification-token"
APP_SECRET = "bench-app-secret"
APPROVALS = "oc_bench_approvals"
ORIGIN = "oc_bench_origin"
STARTER = "ou_bench_starter"
FORM_VALUE = {"f_environment": "o1", "f_comment": "lgtm"}


def settings(db_url: str, operators: list[str]) -> Settings:
    return Settings.model_validate({
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": {"feishu": {"users": [STARTER]}}}},
        "routes": {"ops": {"timeout": "30m", "feishu": {
            "chat_id": APPROVALS, "approvers": {"users": operators}}}},
    })


def bare_app() -> Any:
    """A lark-oapi dispatcher that only toasts: the floor any lark-based bot can reach."""

    def just_toast(_data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        return P2CardActionTriggerResponse({"toast": {"type": "success", "content": "ok"}})

    handler = (
        lark.EventDispatcherHandler.builder(ENCRYPT_KEY, VERIFICATION_TOKEN)
        .register_p2_card_action_trigger(just_toast)
        .build()
    )

    async def endpoint(request: Request) -> Response:
        raw = RawRequest()
        raw.uri = request.url.path
        raw.headers = {k: request.headers[k] for k in _FORWARDED if k in request.headers}
        raw.body = await request.body()
        result = handler.do(raw)  # nothing to wait for: answer inline
        return Response(result.content or b"{}", status_code=result.status_code,
                        media_type="application/json")

    return create_app([("/feishu/events", endpoint)])


def card_ref(card: Message) -> str:
    """The request ref carried by the card's callback buttons (what a click sends)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("tag") == "button":
                found.extend(b["value"]["r"] for b in node.get("behaviors", [])
                             if b.get("type") == "callback")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(card.card(original=True))
    if not found:
        raise RuntimeError("the card has no callback buttons")
    return found[0]


def clicks(
    fake: FakeFeishuApi, card: Message, ref: str, operators: list[str]
) -> list[SignedRequest]:
    """One encrypted, signed ``card.action.trigger`` per operator (fresh ids and nonces)."""
    signed: list[SignedRequest] = []
    for operator in operators:
        event = card_action_event(
            token=VERIFICATION_TOKEN, operator=operator, value={"r": ref, "a": "approve"},
            form_value=FORM_VALUE, message_id=card.message_id, chat_id=card.chat_id,
            app_id=fake.app_id, event_id=uuid.uuid4().hex,
        )
        signed.append(sign_event(event, ENCRYPT_KEY, nonce=uuid.uuid4().hex))
    return signed


async def burst(
    url: str, requests: list[SignedRequest]
) -> tuple[list[float], list[dict[str, Any]]]:
    """Send all requests at once; return per-request latency (s) and the reply bodies."""
    connector = aiohttp.TCPConnector(limit=len(requests))
    async with aiohttp.ClientSession(connector=connector) as client:

        async def one(request: SignedRequest) -> tuple[float, dict[str, Any]]:
            t0 = time.perf_counter()
            async with client.post(url + "/feishu/events", data=request.body,
                                   headers=request.headers) as reply:
                raw = await reply.read()
                elapsed = time.perf_counter() - t0
                if reply.status != 200:
                    raise RuntimeError(f"callback failed: HTTP {reply.status} {raw[:200]!r}")
            answer = json.loads(raw)
            toast = answer.get("toast") if isinstance(answer, dict) else None
            if not isinstance(toast, dict) or not toast.get("type") or not toast.get("content"):
                raise RuntimeError(f"reply without a toast: {raw[:200]!r}")
            return elapsed, answer

        done = await asyncio.gather(*(one(r) for r in requests))
        return [d[0] for d in done], [d[1] for d in done]


async def start_run(url: str, fake: FakeFeishuApi, n: int) -> None:
    """An @-mention in the origin chat, as Feishu would push it."""
    event = message_event(token=VERIFICATION_TOKEN, sender=STARTER, chat_id=ORIGIN,
                          text=f"@_user_1 deploy: ship v1.{n}.0", mentions=[bot_mention()],
                          app_id=fake.app_id)
    signed = sign_event(event, ENCRYPT_KEY)
    async with aiohttp.ClientSession() as client, client.post(
        url + "/feishu/events", data=signed.body, headers=signed.headers
    ) as reply:
        if reply.status != 200:
            raise RuntimeError(f"message event failed: HTTP {reply.status}")


async def new_card(fake: FakeFeishuApi, database: Database, seen: set[str]) -> tuple[Message, str]:
    """The next card in the approvals chat whose delivery the engine has recorded."""
    for _ in range(1000):
        for message in list(fake.messages.values()):
            if (message.chat_id != APPROVALS or message.msg_type != "interactive"
                    or message.parent_id is not None or message.message_id in seen):
                continue
            with database.transaction() as session:
                ref = session.scalar(
                    select(HumanRequest.ref).join(Delivery, Delivery.request_id == HumanRequest.id)
                    .where(Delivery.platform == "feishu",
                           Delivery.message_id == message.message_id))
            if ref is not None:
                if card_ref(message) != ref:
                    raise RuntimeError("the card's buttons carry another ref than its delivery")
                seen.add(message.message_id)
                return message, ref
        await asyncio.sleep(0.01)
    raise RuntimeError("no card was posted")


def decisions(database: Database, ref: str) -> tuple[int, str, str | None]:
    """How many times ``ref`` was decided, its status, and by whom."""
    with database.transaction() as session:
        count = session.scalar(select(func.count()).select_from(AuditLog).where(
            AuditLog.request_ref == ref, AuditLog.event == "decided"))
        request = session.scalars(select(HumanRequest).where(HumanRequest.ref == ref)).one()
        return int(count or 0), request.status, request.decided_by_user


async def settle(
    database: Database, ref: str, timeout: float = 10.0
) -> tuple[int, str, str | None]:
    deadline = time.monotonic() + timeout
    while True:
        found = decisions(database, ref)
        if found[0] or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.05)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(n_clicks: int, rounds: int) -> None:
    operators = [f"ou_op{i:05d}" for i in range(n_clicks)]
    # A unique app id: lark-oapi caches tenant tokens process-wide by app id.
    fake = FakeFeishuApi(app_id=f"cli_bench_{uuid.uuid4().hex[:8]}", app_secret=APP_SECRET,
                         chats={APPROVALS: [STARTER], ORIGIN: [STARTER]})
    results: dict[str, list[float]] = {"askhuman": [], "bare lark": []}
    toasts: dict[str, Counter[str]] = {"askhuman": Counter(), "bare lark": Counter()}
    checks: list[str] = []
    messages: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp, AsgiServer(fake.app) as api:
        conf = settings(f"sqlite:///{Path(tmp) / 'bench.db'}", operators)
        database = Database(conf.database_url)
        database.upgrade()
        engine = Engine(database, conf)
        env = {"FEISHU_APP_ID": fake.app_id, "FEISHU_APP_SECRET": APP_SECRET,
               "FEISHU_MODE": "http", "FEISHU_DOMAIN": api.url,
               "FEISHU_ENCRYPT_KEY": ENCRYPT_KEY, "FEISHU_VERIFICATION_TOKEN": VERIFICATION_TOKEN}
        ours = build_app(engine, start_platforms(engine, conf, env))
        seen: set[str] = set()
        with AsgiServer(ours) as askhuman, AsgiServer(bare_app()) as bare:
            for n in range(rounds + 1):  # round 0 warms both apps up
                await start_run(askhuman.url, fake, n)
                card, ref = await new_card(fake, database, seen)
                bodies = {"askhuman": clicks(fake, card, ref, operators),
                          "bare lark": clicks(fake, card, ref, operators)}
                # Alternate who goes first, and let the previous burst's follow-up
                # work settle, so neither app pays for the other's background work.
                pair = [("bare lark", bare), ("askhuman", askhuman)]
                replies: list[dict[str, Any]] = []
                for name, server in pair if n % 2 else pair[::-1]:
                    await asyncio.sleep(0.5)
                    latencies, answers = await burst(server.url, bodies[name])
                    if name == "askhuman":
                        replies = answers
                    if n:
                        results[name] += latencies
                        toasts[name].update(a["toast"]["type"] for a in answers)
                count, status, winner = await settle(database, ref)
                if count != 1 or status == "pending" or winner not in operators:
                    raise RuntimeError(f"round {n}: {count} decision(s), status {status!r}")
                won = [op for op, a in zip(operators, replies, strict=True)
                       if a["toast"]["type"] == "success"]
                if len(won) > 1 or (won and won[0] != winner):
                    raise RuntimeError(f"round {n}: success toasts for {won}, decided by {winner}")
                messages.update(a["toast"]["content"].replace(str(winner), "<winner>")
                                .split(" at ")[0] for a in replies)
                checks.append(f"round {n}: decided once ({status}, by {winner}); "
                              f"{len(won)} success toast(s)")
        database.dispose()

    print(f"\n{n_clicks} concurrent encrypted+signed card.action.trigger x {rounds} round(s), "
          "127.0.0.1, uvicorn + lark-oapi\n")
    print(f"{'app':<12}{'median ms':>12}{'p99 ms':>10}{'max ms':>10}   toasts")
    for name, values in results.items():
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(toasts[name].items()))
        print(f"{name:<12}{statistics.median(values) * 1000:>12.1f}"
              f"{pct(values, 0.99) * 1000:>10.1f}{max(values) * 1000:>10.1f}   {kinds}")
    ours_, base = results["askhuman"], results["bare lark"]
    print(f"{'ratio':<12}{statistics.median(ours_) / statistics.median(base):>12.2f}"
          f"{pct(ours_, 0.99) / pct(base, 0.99):>10.2f}{max(ours_) / max(base):>10.2f}")
    print("\nEvery reply: HTTP 200 with a toast. " + "; ".join(checks))
    print("askhuman toasts (all rounds): "
          + "; ".join(f"{v} x {k!r}" for k, v in messages.most_common()))
    verdict = "OK" if pct(ours_, 0.99) < 3.0 else "TOO SLOW"
    print(f"Feishu's callback deadline is 3000 ms: p99 {pct(ours_, 0.99) * 1000:.0f} ms "
          f"-> {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=100, help="concurrent clicks per burst")
    parser.add_argument("--rounds", type=int, default=3, help="measured bursts per app")
    options = parser.parse_args()
    asyncio.run(main(options.clicks, options.rounds))
