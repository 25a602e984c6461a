"""How fast does askhuman answer a burst of Feishu card clicks, against a bare dispatcher?

Four processes on 127.0.0.1 (``benchmarks/harness.py``):

* the fake Feishu Open API (``--role fake``, large listen backlog);
* askhuman: the real ``askhuman serve`` CLI in HTTP-callback mode (encrypt key and
  verification token, SQLite, the scripted ``deploy`` agent);
* the baseline (``--role baseline``): a bare lark-oapi ``EventDispatcherHandler`` with
  the same keys behind one Starlette route (``RawRequest`` → ``handler.do``) whose
  ``card.action.trigger`` handler only returns a toast, served with the same uvicorn
  settings as ``askhuman serve``;
* this process, the load client: it fires N encrypted, signed ``card.action.trigger``
  callbacks at once at each app and times each until its toast reply is received.

Two cases: ``race`` (N approvers click the same card) and ``spread`` (N clicks on N
different cards, one each). Rounds alternate which app goes first; round 0 warms up
and is not counted. Every reply must be HTTP 200 with a toast, askhuman's a true one
(the answer taken, already decided, or "received" while still pending; their counts
are printed), and askhuman must decide every card exactly once (its SQLite file is
read between rounds).

    python benchmarks/feishu_ack.py --clicks 100 --rounds 4 [--cases race,spread]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import cpu_profile  # noqa: E402
import harness as h  # noqa: E402

ENCRYPT_KEY = "bench-encrypt-key"
VERIFICATION_TOKEN = "bench-verification-token"
APP_SECRET = "bench-app-secret"
APPROVALS = "oc_bench_approvals"
ORIGIN = "oc_bench_origin"
STARTER = "ou_bench_starter"
FORM_VALUE = {"f_environment": "o1", "f_comment": "lgtm"}
SCRIPT = "feishu_ack.py"


# ---------------------------------------------------------------- role: fake Feishu


def run_fake(port: int, app_id: str, clicks: int) -> None:
    """The approvers are members of the approvals chat, as where a card is clicked:
    a race's losers are told there with an ephemeral card (one call each, not a
    refused ephemeral card and then a direct message)."""
    from tests.fakes.feishu_api import FakeFeishuApi

    fake = FakeFeishuApi(app_id=app_id, app_secret=APP_SECRET,
                         chats={APPROVALS: [STARTER, *approver_ids(clicks)], ORIGIN: [STARTER]})
    h.serve_asgi(fake.app, port, backlog=h.FAKE_BACKLOG)


# ---------------------------------------------------------------- role: baseline


def run_baseline(port: int) -> None:
    """A lark-oapi dispatcher that only toasts: the floor any lark-based bot can reach."""
    import lark_oapi as lark
    from lark_oapi.core.model import RawRequest
    from lark_oapi.event.callback.model.p2_card_action_trigger import (
        P2CardActionTrigger,
        P2CardActionTriggerResponse,
    )
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    def just_toast(_data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        return P2CardActionTriggerResponse({"toast": {"type": "success", "content": "ok"}})

    handler = (lark.EventDispatcherHandler.builder(ENCRYPT_KEY, VERIFICATION_TOKEN)
               .register_p2_card_action_trigger(just_toast).build())
    forwarded = ("X-Lark-Request-Timestamp", "X-Lark-Request-Nonce", "X-Lark-Signature",
                 "X-Request-Id", "Content-Type")

    async def events(request: Request) -> Response:
        raw = RawRequest()
        raw.uri = request.url.path
        raw.headers = {k: request.headers[k] for k in forwarded if k in request.headers}
        raw.body = await request.body()
        result = handler.do(raw)  # nothing to wait for: answer inline
        return Response(result.content or b"{}", status_code=result.status_code,
                        media_type="application/json")

    async def healthz(_request: Request) -> Response:
        return Response(b"ok")

    h.serve_asgi(Starlette(routes=[Route("/feishu/events", events, methods=["POST"]),
                                 Route("/healthz", healthz)]), port)


# ---------------------------------------------------------------- the load client


def write_config(path: Path, db: Path, operators: list[str]) -> None:
    import yaml

    path.write_text(yaml.safe_dump({
        "database_url": f"sqlite:///{db}",
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": {"feishu": {"users": [STARTER]}}}},
        "routes": {"ops": {"timeout": "30m", "feishu": {
            "chat_id": APPROVALS, "approvers": {"users": operators}}}},
    }))


def signed_call(event: dict[str, Any]) -> h.Call:
    from tests.fakes.feishu_signing import sign_event

    signed = sign_event(event, ENCRYPT_KEY, nonce=uuid.uuid4().hex)
    return h.Call("/feishu/events", signed.body, signed.headers)


class Client:
    """Posts cards through askhuman and builds the clicks on them."""

    def __init__(self, app_url: str, app_id: str, db: Path) -> None:
        self.app_url, self.app_id, self.db = app_url, app_id, db
        self.seen: set[str] = set()

    async def new_cards(self, count: int, tag: str) -> list[tuple[str, str]]:
        """Start ``count`` runs (@-mentions, as Feishu pushes them); ``(message id, ref)``
        of each new card once askhuman has recorded its delivery."""
        from tests.fakes.feishu_signing import bot_mention, message_event

        calls = [signed_call(message_event(
            token=VERIFICATION_TOKEN, sender=STARTER, chat_id=ORIGIN, app_id=self.app_id,
            text=f"@_user_1 deploy: ship v{tag}.{i}", mentions=[bot_mention()]))
            for i in range(count)]
        for start in range(0, count, 20):
            await h.burst(self.app_url, calls[start:start + 20])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            fresh = {m: r for m, r in h.delivered(self.db, "feishu").items() if m not in self.seen}
            if len(fresh) >= count:
                self.seen.update(fresh)
                return sorted(fresh.items())
            await asyncio.sleep(0.05)
        raise RuntimeError(f"only {len(fresh)} of {count} cards were posted")

    def click(self, operator: str, message_id: str, ref: str) -> h.Call:
        from tests.fakes.feishu_signing import card_action_event

        return signed_call(card_action_event(
            token=VERIFICATION_TOKEN, operator=operator, value={"r": ref, "a": "approve"},
            form_value=FORM_VALUE, message_id=message_id, chat_id=APPROVALS,
            app_id=self.app_id, event_id=uuid.uuid4().hex))


def true_answers() -> dict[str, str]:
    """askhuman's toasts that are true in these cases, English text → kind: the answer
    taken, the card already decided (a race's losers refused before they were stored),
    or "received" while the decision is still pending."""
    from renderers.i18n import CATALOG

    return {"Thanks, your answer (Approve) was recorded.": "accepted",
            "Already decided by ": "already decided",
            CATALOG["en"]["click.received"]: "received (pending)"}


def read_toast(app: str, body: bytes) -> str:
    """The toast's kind (askhuman: one of ``true_answers``, else the run fails)."""
    toast = json.loads(body).get("toast")
    if not isinstance(toast, dict) or not toast.get("type") or not toast.get("content"):
        raise RuntimeError(f"reply without a toast: {body[:200]!r}")
    if app != "askhuman":
        return f"{toast['type']}: {toast['content'][:60]}"
    for start, kind in true_answers().items():
        if toast["content"].startswith(start):
            return f"{toast['type']}: {kind}"
    raise RuntimeError(f"askhuman answered a toast that is not a true answer: {body[:300]!r}")


async def run_case(case: str, client: Client, apps: dict[str, str], operators: list[str],
                   rounds: int, pids: dict[str, int] | None = None,
                   profile: Path | None = None) -> list[str]:
    async def prepare(n: int) -> tuple[list[str], h.CallsFor]:
        cards = await client.new_cards(1 if case == "race" else len(operators), f"{case}{n}")
        if case == "race":
            pairs = [(op, *cards[0]) for op in operators]
        else:
            pairs = [(op, *card) for op, card in zip(operators, cards, strict=True)]
        return ([ref for _, ref in cards],
                lambda _app: [client.click(op, message, ref) for op, message, ref in pairs])

    measured = await h.measure_rounds(apps, rounds, client.db, prepare, read_toast,
                                       pids=pids, profile=profile and profile / case)
    what = ("one card, N approvers" if case == "race" else "N cards, one click each")
    lines = h.ratio_table(f"Feishu card action → toast, {case} ({what}), N = {len(operators)}, "
                        f"{rounds} round(s)", measured.latencies, "bare lark-oapi")
    for app, said in measured.replies.items():
        lines.append(f"\n{app} replies: " + "; ".join(f"{v} × {k!r}" for k, v in
                                                      Counter(said).most_common()))
    if measured.cpu:
        lines.append("\n" + measured.cpu_line())
    lines.append("\n" + "; ".join(measured.rounds))
    return lines


def approver_ids(clicks: int) -> list[str]:
    """The approvers' open ids: one per concurrent click."""
    return [f"ou_op{i:05d}" for i in range(clicks)]


async def client_main(clicks: int, rounds: int, cases: list[str],
                      profile: Path | None = None) -> None:
    operators = approver_ids(clicks)
    app_id = f"cli_bench_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp, h.Parties(Path(tmp)) as parties:
        fake_port, app_port, base_port = h.free_port(), h.free_port(), h.free_port()
        fake = parties.role(SCRIPT, "fake", "--port", str(fake_port), "--app-id", app_id,
                            "--clicks", str(clicks))
        fake.url = f"http://127.0.0.1:{fake_port}"
        baseline = parties.role(SCRIPT, "baseline", "--port", str(base_port))
        baseline.url = f"http://127.0.0.1:{base_port}"
        db, config = Path(tmp) / "askhuman.db", Path(tmp) / "askhuman.yaml"
        write_config(config, db, operators)
        h.wait_http(fake, "/")
        app = parties.askhuman(config, app_port, {
            "FEISHU_APP_ID": app_id, "FEISHU_APP_SECRET": APP_SECRET, "FEISHU_MODE": "http",
            "FEISHU_DOMAIN": fake.url, "FEISHU_ENCRYPT_KEY": ENCRYPT_KEY,
            "FEISHU_VERIFICATION_TOKEN": VERIFICATION_TOKEN})
        h.wait_http(app)
        h.wait_http(baseline)
        client = Client(app.url, app_id, db)
        apps = {"askhuman": app.url, "bare lark-oapi": baseline.url}
        pids = {"askhuman": app.pid, "bare lark-oapi": baseline.pid}
        for case in cases:
            if profile:
                (profile / case).mkdir(parents=True, exist_ok=True)
            print("\n".join(await run_case(case, client, apps, operators, rounds, pids,
                                           profile)), flush=True)
            if profile:
                print(cpu_profile.report(sorted((profile / case).glob("burst-*.txt"))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["client", "fake", "baseline"], default="client")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--app-id", default="")
    parser.add_argument("--clicks", type=int, default=100, help="concurrent clicks per burst")
    parser.add_argument("--rounds", type=int, default=4, help="measured rounds per case")
    parser.add_argument("--cases", default="race,spread", help="race, spread or both")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="record askhuman with py-spy --gil during its measured bursts "
                             "only (DIR/<case>/burst-<round>.txt, raw collapsed stacks) and "
                             "print where its Python CPU went; the latencies are then "
                             "py-spy's, not askhuman's")
    ns = parser.parse_args()
    if ns.role == "fake":
        run_fake(ns.port, ns.app_id, ns.clicks)
    elif ns.role == "baseline":
        run_baseline(ns.port)
    else:
        asyncio.run(client_main(ns.clicks, ns.rounds, ns.cases.split(","), ns.profile))


if __name__ == "__main__":
    main()
