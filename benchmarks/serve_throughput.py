"""End-to-end decisions per second of ``askhuman serve``, black-box, over Slack.

Processes on 127.0.0.1 (``benchmarks/harness.py``): the fake Slack Web API
(``slack_ack.py --role fake``), one ``askhuman serve`` on SQLite, and, when
``ASKHUMAN_TEST_POSTGRES_URL`` is set, two replicas, ``serve --workers 2`` and one
``serve`` on PostgreSQL (a scratch database each, ``pg_scratch``), and this load client.
The client starts N runs of the scripted ``deploy`` agent with signed slash commands and
waits for their N cards; then it clicks Approve on every card, ``--in-flight`` clicks at
a time (spread over the replicas), and waits until the N final answers ("Deployed …")
are posted. Each decision is the full path: durable click → compare-and-set → card
update through the outbox → resume of the agent → final answer posted.

    decisions/s = N / (first click sent → last final answer seen)

    python benchmarks/serve_throughput.py --runs 200 [--in-flight 100]
    python benchmarks/serve_throughput.py --runs 200 --workers 1,2 --repeat 3

``--idle N`` measures latency instead, on an idle server (SQLite, one ``serve``): N
clicks one at a time, ``--gap`` seconds apart on average (0.5–1.5 times it, at random:
past the committer's linger, so each click finds the server quiet, and at no fixed phase
to a process's periodic work), each timed from its ack (the HTTP response) to its card
update and to its final answer, as the fake Slack saw them arrive (``time.monotonic``,
one clock for every process on the machine):

    python benchmarks/serve_throughput.py --idle 40 [--gap 1.5] [--split]

``--split`` runs that on ``serve --no-background`` beside ``askhuman worker`` (one
SQLite file, two processes): the worker runs the resumes the web process's decisions
queue.

``--workers 1,2`` runs ``serve`` and ``serve --workers 2`` (gunicorn's forked uvicorn
workers on one port) in turn, ``--repeat`` times, alternating which goes first; the askhuman CPU is
summed over the parent and its workers. ``split`` in that list is ``serve
--no-background`` beside ``askhuman worker`` (its CPU summed over both). With every
click in one wave (``--runs`` ≤ ``--in-flight``, e.g. ``--runs 100``), two waits per click
are reported too (p50 / p99), with 100 in flight: until its resume was done (the
agent's answer → resume, from its job's row in the database once the wave is over) and
until its final answer was posted (as the fake Slack saw it).

The in-process variant (``throughput.py``) measures the engine alone, with the
answer → resume-start latency.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import random
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import cpu_profile  # noqa: E402
import harness as h  # noqa: E402
import slack_ack as slack  # noqa: E402
from pg_scratch import scratch  # noqa: E402
from sqlalchemy import create_engine, select  # noqa: E402

from storage import ResumeJob  # noqa: E402

APPROVER = "U00000"


def fetch(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return json.loads(reply.read())


async def post_cards(urls: Sequence[str], fake_url: str, api_port: str, runs: int,
                     start_burst: int = 20) -> dict[str, Any]:
    """Start ``runs`` runs, ``start_burst`` at a time, spread over the servers at
    ``urls``; the blocks of each new card by its ts. (On a loaded machine a start can
    miss its store-before-ack budget and is refused; smaller bursts avoid that. The
    starts are not measured.) Every replica starts runs, so each has built its agent
    (imported pydantic-ai, once per process) before the measured clicks: otherwise a
    replica that only resumes paid that import inside the measurement."""
    from urllib.parse import urlencode

    calls = [slack.signed(urlencode({
        "command": "/askhuman", "text": f"run deploy ship v7.{i}.0", "user_id": slack.STARTER,
        "user_name": "starter", "channel_id": slack.ORIGIN, "team_id": "T0TEST",
        "response_url": f"http://127.0.0.1:{api_port}/response_url/cmd"})) for i in range(runs)]
    for start in range(0, runs, start_burst):
        chunk = calls[start:start + start_burst]
        await asyncio.gather(*(h.burst(url, chunk[i::len(urls)])
                               for i, url in enumerate(urls)))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        cards = fetch(fake_url + "/_bench/cards")
        if len(cards) >= runs:
            return dict(cards)
        await asyncio.sleep(0.2)
    raise RuntimeError(f"only {len(cards)} of {runs} cards were posted")


def wait_workers(database_url: str, workers: int, timeout: float = 120.0) -> None:
    """Until ``workers`` processes beat their ``instances`` row: ``/healthz`` answers
    as soon as the first worker is up, and a run must not start before the last."""
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                live = conn.execute(text("SELECT count(*) FROM instances "
                                         "WHERE stopped_at IS NULL")).scalar_one()
            if live >= workers:
                return
            time.sleep(0.2)
    finally:
        engine.dispose()
    raise RuntimeError(f"{workers} workers did not come up within {timeout:.0f} s")


def start_fake_slack(parties: h.Parties, tmp: Path, database_url: str
                     ) -> tuple[Any, str, Path, dict[str, str]]:
    """The fake Slack API in its own process, and what ``serve`` needs to use it: the
    fake's process, its API port, a config on ``database_url`` and the environment."""
    from tests.fakes.slack_api import BOT_TOKEN

    ready = tmp / "fake.ready"
    fake = parties.role("slack_ack.py", "fake", "--port", str(port := h.free_port()),
                        "--clicks", "1", "--ready", str(ready))
    fake.url = f"http://127.0.0.1:{port}"
    api_url = h.wait_file(fake, ready)
    api_port = api_url.split(":")[2].split("/")[0]
    config = tmp / "askhuman.yaml"
    slack.write_config(config, database_url)
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": slack.SECRET,
           "SLACK_API_URL": api_url}
    return fake, api_port, config, env


def start_worker(parties: h.Parties, config: Path, env: dict[str, str],
                 database_url: str, processes: int) -> h.Party:
    """``askhuman worker`` beside ``serve --no-background``, started once the web
    process migrated the database; returns when all ``processes`` beat."""
    port = h.free_port()
    worker = parties.spawn("worker", [sys.executable, "-m", "bot.cli", "worker", "--config",
                                      str(config), "--port", str(port), "--log-level",
                                      "warning"], env)
    worker.url = f"http://127.0.0.1:{port}"
    h.wait_http(worker)
    wait_workers(database_url, processes)
    return worker


async def one_setup(database_url: str, replicas: int, runs: int, in_flight: int,
                    workers: int = 1, stack: tuple[str, ...] = (), start_burst: int = 20,
                    profile: Path | None = None, split: bool = False,
                    waits: list[float] | None = None, resumed: list[float] | None = None,
                    ) -> tuple[float, dict[str, float]]:
    """Decisions/s and CPU per decision of each party; with ``waits`` and every click
    in one wave (``runs <= in_flight``), each click → final answer posted wait in ms
    (the fake Slack's arrival times on the machine's one monotonic clock), and with
    ``resumed`` each click → resume done (``resume_done_waits``)."""
    cpu_waits = waits if waits is not None else []
    with tempfile.TemporaryDirectory() as tmp, h.Parties(Path(tmp)) as parties:
        fake, api_port, config, env = start_fake_slack(parties, Path(tmp), database_url)
        servers = []
        flags = ((("--workers", str(workers)) if workers > 1 else ()) + stack
                 + (("--no-background",) if split else ()))
        for i in range(replicas):  # one after another: the first one migrates the database
            servers.append(parties.askhuman(config, h.free_port(), env, f"askhuman {i}",
                                            *flags))
            h.wait_http(servers[-1])
        if split:
            servers.append(start_worker(parties, config, env, database_url, workers + 1))
        elif workers > 1:
            wait_workers(database_url, workers)
        takers = servers[:replicas]  # a worker takes no events
        cards = await post_cards([server.url for server in takers], fake.url, api_port, runs,
                                 start_burst)
        clicks = [slack.signed(slack.click_body(blocks, ts, APPROVER, api_port))
                  for ts, blocks in cards.items()]
        count = (f"{fake.url}/_bench/count?channel={slack.ORIGIN}&text=Deployed")
        pids = {"askhuman": servers, "fake Slack": [fake]}
        before = {name: sum(h.tree_cpu_seconds(p.pid) for p in group)
                  for name, group in pids.items()}
        before["client"] = h.cpu_seconds(os.getpid())
        spies = [cpu_profile.record(server.pid, profile / f"serve-{i}.txt")
                 for i, server in enumerate(servers)] if profile else []
        begin, sent_at, sent_wall = time.perf_counter(), time.monotonic(), time.time()
        for start in range(0, len(clicks), in_flight):
            wave = clicks[start:start + in_flight]
            await asyncio.gather(*(h.burst(server.url, wave[i::replicas])
                                   for i, server in enumerate(takers)))
        deadline = time.monotonic() + 600
        while (done := fetch(count)) < runs:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {done} of {runs} final answers were posted")
            await asyncio.sleep(0.05)
        rate = runs / (time.perf_counter() - begin)
        if runs <= in_flight:  # one wave, sent at once: each final answer's wait
            answered = fetch(f"{fake.url}/_bench/posted?channel={slack.ORIGIN}&text=Deployed")
            cpu_waits.extend((at - sent_at) * 1000 for at in answered)
            if resumed is not None:
                resumed.extend(resume_done_waits(database_url, sent_wall))
        for spy in spies:
            cpu_profile.finish(spy)
        after = {name: sum(h.tree_cpu_seconds(p.pid) for p in group)
                 for name, group in pids.items()}
        after["client"] = h.cpu_seconds(os.getpid())
        cpu = {name: (after[name] - before[name]) / runs * 1000 for name in after}
        return rate, cpu


def resume_done_waits(database_url: str, sent_wall: float) -> list[float]:
    """Each resume's wait from the wave's send to its outcome committed, in ms: the
    ``updated_at`` its job gets when done (the server's UTC wall clock, in the
    transaction that records the outcome), read from the database afterwards. What
    the agent waits for (the goal's "answer → resume"), before its final answer goes
    out through the outbox."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            done = conn.execute(select(ResumeJob.updated_at)
                                .where(ResumeJob.state == "done")).scalars().all()
    finally:
        engine.dispose()
    return [(at.replace(tzinfo=dt.UTC).timestamp() - sent_wall) * 1000 for at in done]


async def idle_clicks(database_url: str, clicks: int, gap: float, split: bool = False
                      ) -> dict[str, list[float]]:
    """One ``serve``, ``clicks`` cards, then one click at a time on an idle server: per
    click, ms from the ack to the card updated and to the final answer posted. With
    ``split``, ``serve --no-background`` takes the clicks and ``askhuman worker`` beside
    it runs the resumes."""
    with tempfile.TemporaryDirectory() as tmp, h.Parties(Path(tmp)) as parties:
        fake, api_port, config, env = start_fake_slack(parties, Path(tmp), database_url)
        server = parties.askhuman(config, h.free_port(), env, "askhuman",
                                  *(["--no-background"] if split else []))
        h.wait_http(server)
        if split:
            start_worker(parties, config, env, database_url, 2)
        cards = await post_cards([server.url], fake.url, api_port, clicks, start_burst=1)
        answers = f"{fake.url}/_bench/posted?channel={slack.ORIGIN}&text=Deployed"
        updates = f"{fake.url}/_bench/posted?method=chat.update&channel={slack.CHANNEL}&text="
        out: dict[str, list[float]] = {"click → ack": [], "ack → card updated": [],
                                       "ack → final answer posted": []}
        jitter = random.Random(0)
        for ts, blocks in cards.items():
            await asyncio.sleep(gap * jitter.uniform(0.5, 1.5))  # arrivals at random
            seen_answers, seen_updates = len(fetch(answers)), len(fetch(updates))
            click = slack.signed(slack.click_body(blocks, ts, APPROVER, api_port))
            sent = time.monotonic()
            took, _ = await h.burst(server.url, [click])
            acked = sent + took[0]
            deadline = time.monotonic() + 30
            while (len(posted := fetch(answers)) <= seen_answers
                   or len(updated := fetch(updates)) <= seen_updates):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no final answer or card update for the card {ts}")
                await asyncio.sleep(0.005)
            out["click → ack"].append(took[0] * 1000)
            out["ack → card updated"].append((updated[seen_updates] - acked) * 1000)
            out["ack → final answer posted"].append((posted[seen_answers] - acked) * 1000)
        return out


def report_idle(figures: dict[str, list[float]]) -> None:
    print("| idle server, one click at a time | p50 ms | p99 ms | max ms |\n|---|---|---|---|")
    for name, values in figures.items():
        print(f"| {name} | {h.pct(values, 0.5):.1f} | {h.pct(values, 0.99):.1f} | "
              f"{max(values):.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--workers", default="1",
                        help="comma-separated `serve --workers` counts on SQLite, run in "
                             "turn (e.g. 1,2); `split`: `serve --no-background` beside "
                             "`askhuman worker`")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the SQLite setups this many times, interleaved")
    parser.add_argument("--start-burst", type=int, default=20,
                        help="slash commands sent at once while the cards are posted")
    parser.add_argument("--stacks", default="auto/auto",
                        help="comma-separated HTTP parser/event loop pairs `serve` runs "
                             "with on SQLite, in turn (`--http`/`--loop`; e.g. "
                             "h11/asyncio,httptools/uvloop)")
    parser.add_argument("--idle", type=int, default=0,
                        help="instead: this many clicks one at a time on an idle server, "
                             "ack → card updated / final answer posted (SQLite)")
    parser.add_argument("--gap", type=float, default=1.5,
                        help="--idle: mean seconds between clicks (0.5-1.5 times it)")
    parser.add_argument("--split", action="store_true",
                        help="--idle: `serve --no-background` beside `askhuman worker` "
                             "instead of one `serve`")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="also record each `serve` with py-spy --gil while the clicks "
                             "are answered (one SQLite setup) into DIR and print where "
                             "the Python CPU went (benchmarks/cpu_profile.py); py-spy "
                             "samples from outside, but its pauses inflate the CPU figure")
    parser.add_argument("--profile-replicas", action="store_true",
                        help="--profile: two `serve` replicas on PostgreSQL "
                             "(ASKHUMAN_TEST_POSTGRES_URL) instead of SQLite")
    ns = parser.parse_args()
    if ns.profile:
        profile_one(ns)
        return
    if ns.idle:
        with tempfile.TemporaryDirectory() as tmp:
            report_idle(asyncio.run(idle_clicks(f"sqlite:///{Path(tmp) / 'askhuman.db'}",
                                                ns.idle, ns.gap, ns.split)))
        return
    base = os.environ.get("ASKHUMAN_TEST_POSTGRES_URL")
    print("| setup | decisions/s (click → final answer posted) | CPU ms per decision: "
          "askhuman / fake Slack / client | click → resume done p50 / p99 ms (one wave) "
          "| click → final answer posted p50 / p99 ms (one wave) |\n|---|---|---|---|---|")
    for round_no in range(ns.repeat):
        setups = [(w, s) for w in ns.workers.split(",") for s in ns.stacks.split(",")]
        for count, stack in h.interleaved(round_no, setups):
            split = count == "split"
            workers = 1 if split else int(count)
            http, loop = stack.split("/")
            waits: list[float] = []
            resumed: list[float] = []
            with tempfile.TemporaryDirectory() as tmp:
                rate, cpu = asyncio.run(one_setup(
                    f"sqlite:///{Path(tmp) / 'askhuman.db'}", 1, ns.runs, ns.in_flight,
                    workers, ("--http", http, "--loop", loop), ns.start_burst, split=split,
                    waits=waits, resumed=resumed))
            setup = ("`serve --no-background` + `askhuman worker`" if split else
                     "one `serve`" if workers == 1 else f"`serve --workers {workers}`")
            if stack != "auto/auto":
                setup += f" ({stack})"
            print(f"| {setup}, SQLite | {rate:.1f} | {_cpu(cpu)} | {_waits(resumed)} "
                  f"| {_waits(waits)} |", flush=True)
    if base:
        postgres_rows(base, ns.runs, ns.in_flight)


def profile_one(ns: argparse.Namespace) -> None:
    """``--profile``: one setup recorded by py-spy, and where its Python CPU went."""
    ns.profile.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if ns.profile_replicas:
            url, replicas = stack.enter_context(scratch(os.environ[
                "ASKHUMAN_TEST_POSTGRES_URL"])), 2
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            url, replicas = f"sqlite:///{Path(tmp) / 'askhuman.db'}", 1
        rate, cpu = asyncio.run(one_setup(
            url, replicas, ns.runs, ns.in_flight, int(ns.workers.split(",")[0]),
            start_burst=ns.start_burst, profile=ns.profile))
    print(f"{rate:.1f} decisions/s, CPU ms per decision {_cpu(cpu)} (under py-spy)\n")
    print(cpu_profile.report(sorted(ns.profile.glob("serve-*.txt"))))


def postgres_rows(base: str, runs: int, in_flight: int) -> None:
    """Two ``serve`` replicas, ``serve --workers 2`` and one ``serve`` (what the other
    two are compared with) on PostgreSQL, each on a scratch database."""
    for replicas, workers, setup in ((2, 1, "two `serve` replicas"),
                                     (1, 2, "`serve --workers 2`"), (1, 1, "one `serve`")):
        waits: list[float] = []
        resumed: list[float] = []
        with scratch(base) as url:
            rate, cpu = asyncio.run(one_setup(url, replicas, runs, in_flight, workers,
                                              waits=waits, resumed=resumed))
        print(f"| {setup}, PostgreSQL | {rate:.1f} | {_cpu(cpu)} | {_waits(resumed)} "
              f"| {_waits(waits)} |", flush=True)


def _waits(waits: list[float]) -> str:
    """p50 / p99 of the clicks' waits (n/a: several waves)."""
    if not waits:
        return "n/a"
    return f"{h.pct(waits, 0.5):.0f} / {h.pct(waits, 0.99):.0f}"


def _cpu(cpu: dict[str, float]) -> str:
    """CPU per decision of each party while the clicks were answered (the replicas'
    summed; PostgreSQL's own server processes are not counted)."""
    return " / ".join(f"{cpu[name]:.1f}" for name in ("askhuman", "fake Slack", "client"))


if __name__ == "__main__":
    main()
