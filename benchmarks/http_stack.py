"""CPU per click of the transport alone, for each HTTP parser / event loop pair.

A click costs askhuman an inbound HTTP request, thread hops for the database and
outbound calls to the platform. This benchmark does only those, without the engine,
so the share of uvicorn's HTTP parser and the event loop shows without the engine's
noise (``serve_throughput.py --stacks …`` measures the whole decision):

* server (``--role server --http H --loop L``): ``POST /slack/events`` reads a
  Slack-sized form body, hops to a thread (as a database write does), posts a card's
  worth of JSON to the sink with one kept-alive aiohttp session (as ``chat.update``
  does) and answers 200; served by ``harness.serve_asgi`` with that pair;
* sink (``--role sink``): answers ``{"ok": true}``, as the fake Slack API;
* client (this script): ``--requests`` POSTs per round, ``--in-flight`` at a time, a
  connection each; the server's CPU (``harness.cpu_seconds``) per request.

Rounds interleave the pairs (``harness.interleaved``); the table gives the median per
pair and its ratio to h11/asyncio.

    python benchmarks/http_stack.py --requests 2000 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import harness as h  # noqa: E402

STACKS = ("h11/asyncio", "httptools/asyncio", "h11/uvloop", "httptools/uvloop")
CARD = {"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 200}}] * 8}
FORM = b"payload=" + b"%7B%22type%22%3A%22block_actions%22" * 60


def server(port: int, sink: str, http: str, loop: str) -> None:
    import aiohttp
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    session: list[aiohttp.ClientSession] = []

    async def events(request: Request) -> Response:
        await request.body()
        await asyncio.to_thread(len, "store the click")
        if not session:
            session.append(aiohttp.ClientSession())
        async with session[0].post(sink, json=CARD) as reply:
            await reply.read()
        return Response(b"")

    async def healthz(request: Request) -> Response:
        return Response(b"ok")

    h.serve_asgi(Starlette(routes=[Route("/slack/events", events, methods=["POST"]),
                                   Route("/healthz", healthz)]), port, http=http, loop=loop)


def sink(port: int) -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def update(request: Request) -> Response:
        await request.body()
        return Response(b'{"ok": true}', media_type="application/json")

    async def healthz(request: Request) -> Response:
        return Response(b"ok")

    h.serve_asgi(Starlette(routes=[Route("/chat.update", update, methods=["POST"]),
                                   Route("/healthz", healthz)]), port,
                 backlog=h.FAKE_BACKLOG)


async def one_round(parties: h.Parties, sink_url: str, stack: str, requests: int,
                    in_flight: int) -> float:
    """Server CPU µs per request for ``stack``."""
    http, loop = stack.split("/")
    port = h.free_port()
    party = parties.role("http_stack.py", "server", "--port", str(port), "--sink",
                         sink_url + "/chat.update", "--http", http, "--loop", loop,
                         name=f"server {http} {loop}")
    party.url = f"http://127.0.0.1:{port}"
    h.wait_http(party)
    calls = [h.Call("/slack/events", FORM,
                    {"Content-Type": "application/x-www-form-urlencoded"})] * requests
    await h.burst(party.url, calls[:in_flight])  # warm up: imports, the session
    before = h.cpu_seconds(party.pid)
    for start in range(0, requests, in_flight):
        await h.burst(party.url, calls[start:start + in_flight])
    used = h.cpu_seconds(party.pid) - before
    party.stop()
    return used / requests * 1e6


async def client(ns: argparse.Namespace) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {stack: [] for stack in ns.stacks.split(",")}
    with tempfile.TemporaryDirectory() as tmp, h.Parties(Path(tmp)) as parties:
        port = h.free_port()
        fake = parties.role("http_stack.py", "sink", "--port", str(port))
        fake.url = f"http://127.0.0.1:{port}"
        h.wait_http(fake)
        for round_no in range(ns.rounds):
            for stack in h.interleaved(round_no, list(results)):
                results[stack].append(
                    await one_round(parties, fake.url, stack, ns.requests, ns.in_flight))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", default="client", choices=["client", "server", "sink"])
    parser.add_argument("--port", type=int)
    parser.add_argument("--sink")
    parser.add_argument("--http", default="h11")
    parser.add_argument("--loop", default="asyncio")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stacks", default=",".join(STACKS))
    parser.add_argument("--json", action="store_true", help="print the raw results too")
    ns = parser.parse_args()
    if ns.role == "server":
        server(ns.port, ns.sink, ns.http, ns.loop)
        return
    if ns.role == "sink":
        sink(ns.port)
        return
    results = asyncio.run(client(ns))
    base = statistics.median(results[STACKS[0]]) if STACKS[0] in results else None
    print(f"| HTTP parser / event loop | server CPU µs per request, median of {ns.rounds} "
          f"(each round) | vs h11/asyncio |\n|---|---|---|")
    for stack, values in results.items():
        median = statistics.median(values)
        ratio = f"{median / base:.2f}×" if base else "—"
        shown = ", ".join(f"{v:.0f}" for v in values)
        print(f"| {stack} | **{median:.0f}** ({shown}) | {ratio} |")
    if ns.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
