"""The benchmarks' process harness: every party in its own process, as in production.

A benchmark script is the load client. It starts the other parties as child
processes and talks to them only over 127.0.0.1:

* askhuman: the real CLI, ``python -m bot.cli serve --config … --port …`` (its own
  uvicorn wiring), with the platform credentials in its environment;
* a baseline (a bare slack-bolt ``AsyncApp`` or lark-oapi dispatcher): the script
  itself with ``--role baseline``, served by ``serve_asgi`` with the same uvicorn
  settings ``askhuman serve`` uses;
* the fake Slack/Feishu API: the script with ``--role fake``, with a large listen
  backlog, so a burst's connections queue instead of being dropped (a dropped SYN is
  retried after a second and would pose as latency).

Also here: waiting for a party to be ready, stopping it (by its own process id, never
by name), resident memory of a process, read-only looks into askhuman's SQLite file,
concurrent HTTP bursts and the median/p99/ratio tables every benchmark prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
import cpu_profile  # noqa: E402

from bot.commands.http_stack import uvicorn_options  # noqa: E402

UVICORN: dict[str, Any] = uvicorn_options("warning")
"""What ``askhuman serve --log-level warning`` passes to ``uvicorn.run`` (besides host
and port; the same function makes both): baselines are served with exactly these
settings, httptools and uvloop included where they are installed."""
T = TypeVar("T")
FAKE_BACKLOG = 4096
"""Listen backlog of the fake platform APIs (the kernel caps it at somaxconn)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_asgi(app: Any, port: int, **extra: Any) -> None:
    """Serve ``app`` in this process like ``askhuman serve`` serves askhuman."""
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=port, **{**UVICORN, **extra})


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: this worktree first on the path, nothing from the
    caller's askhuman or platform settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASKHUMAN_", "SLACK_", "FEISHU_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(BENCH)])
    env["SKIP_SLACK_SDK_WARNING"] = "1"
    env.update(extra or {})
    return env


@dataclass
class Party:
    """One child process; its output goes to ``log``."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    url: str = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    def check(self) -> None:
        """Raise with the tail of its log if the process has exited."""
        if self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} exited ({self.process.returncode}):\n{tail}")

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (uvicorn shuts down gracefully), then SIGKILL, this process only."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


@dataclass
class Parties(AbstractContextManager["Parties"]):
    """The children of one benchmark; all are stopped on exit, the last started first."""

    workdir: Path
    started: list[Party] = field(default_factory=list)

    def __enter__(self) -> Parties:
        # A SIGTERM to the client (``timeout``, Ctrl-C's cousin) still stops the children.
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        return self

    def spawn(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> Party:
        log = self.workdir / f"{name.replace(' ', '_')}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                       env=child_env(env), cwd=ROOT)
        party = Party(name, process, log)
        self.started.append(party)
        return party

    def role(self, script: str, role: str, *args: str, env: dict[str, str] | None = None,
             name: str | None = None) -> Party:
        """``python <script> --role <role> <args>`` (a fake API or a baseline)."""
        return self.spawn(name or role, [sys.executable, str(BENCH / script), "--role", role,
                                         *args], env)

    def askhuman(self, config: Path, port: int, env: dict[str, str],
                 name: str = "askhuman", *flags: str) -> Party:
        """The real CLI: ``askhuman serve`` with ``config`` on ``port`` (and ``flags``,
        e.g. ``--workers 2``)."""
        party = self.spawn(name, [sys.executable, "-m", "bot.cli", "serve", "--config",
                                  str(config), "--port", str(port), "--log-level", "warning",
                                  *flags], env)
        party.url = f"http://127.0.0.1:{port}"
        return party

    def __exit__(self, kind: object, *exc: object) -> None:
        for party in reversed(self.started):
            party.stop()
            if kind is not None:  # show what each party said before the failure
                tail = party.log.read_text(errors="replace")[-2000:]
                print(f"--- {party.name} (pid {party.pid}) log tail:\n{tail}", file=sys.stderr)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def wait_http(party: Party, path: str = "/healthz", timeout: float = 60.0) -> None:
    """Until ``party.url + path`` answers (any HTTP status below 500)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        party.check()
        try:
            with urllib.request.urlopen(party.url + path, timeout=2) as reply:
                if reply.status < 500:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{party.name} did not answer {path} within {timeout:.0f} s")


def wait_file(party: Party, path: Path, timeout: float = 60.0) -> str:
    """Until the child wrote ``path`` (its ready signal); returns the text."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        party.check()
        if path.exists() and (text := path.read_text().strip()):
            return text
        time.sleep(0.05)
    raise RuntimeError(f"{party.name} was not ready within {timeout:.0f} s")


def signal_ready(path: Path, text: str) -> None:
    """From a child: tell the client it is ready (atomically, so no half file is read)."""
    partial = path.with_suffix(".partial")
    partial.write_text(text)
    partial.replace(path)


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` (VmRSS), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """``cpu_seconds`` of process ``pid`` and every live descendant (``serve
    --workers N``: gunicorn's arbiter and its forked workers); one that just ended is skipped."""
    total, stack = 0.0, [pid]
    while stack:
        current = stack.pop()
        try:
            total += cpu_seconds(current)
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            with contextlib.suppress(OSError):
                stack += [int(child) for child in (task / "children").read_text().split()]
    return total


def cpu_of(pids: dict[str, int]) -> dict[str, float]:
    """``cpu_seconds`` of each named process (``self``: this one)."""
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


# ---------------------------------------------------------------- askhuman's database


def query(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Read askhuman's SQLite file (read-only; WAL readers never block its writers)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return list(conn.execute(sql, args).fetchall())


def delivered(db: Path, platform: str) -> dict[str, str]:
    """message id → request ref of every card askhuman has recorded as delivered."""
    rows = query(db, "SELECT d.message_id, h.ref FROM deliveries d JOIN human_requests h "
                     "ON h.id = d.request_id WHERE d.platform = ?", platform)
    return {str(message): str(ref) for message, ref in rows}


def decided_counts(db: Path, refs: Iterable[str]) -> dict[str, int]:
    """How many ``decided`` audit rows each ref has (exactly-once means 1)."""
    wanted = list(refs)
    marks = ",".join("?" * len(wanted))
    rows = query(db, f"SELECT request_ref, count(*) FROM audit_log WHERE event = 'decided' "
                     f"AND request_ref IN ({marks}) GROUP BY request_ref", *wanted)
    counts = dict.fromkeys(wanted, 0)
    counts.update({str(ref): int(n) for ref, n in rows})
    return counts


def busy(db: Path) -> int:
    """Work askhuman still has queued or running: stored clicks, outbox, resumes."""
    return sum(int(query(db, f"SELECT count(*) FROM {table} WHERE state IN "
                             "('queued', 'running', 'telling')")[0][0])
               for table in ("click_inbox", "outbox", "resume_jobs"))


async def settle(db: Path, refs: Sequence[str], timeout: float = 60.0) -> dict[str, int]:
    """Wait until every ref is decided and askhuman has nothing left to do (so the next
    round does not pay for this one's background work); the decided counts."""
    deadline = time.monotonic() + timeout
    while True:
        counts = decided_counts(db, refs)
        if (all(counts.values()) and not busy(db)) or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(0.1)


# ---------------------------------------------------------------- load and statistics


@dataclass(frozen=True)
class Call:
    """One HTTP POST of a burst."""

    path: str
    body: bytes
    headers: dict[str, str]


async def burst(url: str, calls: Sequence[Call]) -> tuple[list[float], list[bytes]]:
    """POST every call at once (a connection each); latency in seconds and reply body
    per call. Raises on any reply but HTTP 2xx."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:

        async def one(call: Call) -> tuple[float, bytes]:
            started = time.perf_counter()
            async with client.post(url + call.path, data=call.body,
                                   headers=call.headers) as reply:
                raw = await reply.read()
                elapsed = time.perf_counter() - started
                if reply.status // 100 != 2:
                    raise RuntimeError(f"{call.path}: HTTP {reply.status} {raw[:200]!r}")
            return elapsed, raw

        done = await asyncio.gather(*(one(call) for call in calls))
    return [d[0] for d in done], [d[1] for d in done]


def pct(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def interleaved(round_no: int, names: Sequence[T]) -> list[T]:
    """Who goes first alternates between rounds."""
    return list(names) if round_no % 2 else list(reversed(names))


def ratio_table(title: str, results: dict[str, list[float]], baseline: str) -> list[str]:
    """Markdown rows: median, p99 and max in ms for each app, then the ratio of every
    other app to ``baseline``."""
    lines = [f"\n### {title}\n", "| app | n | median ms | p99 ms | max ms |",
             "|---|---|---|---|---|"]
    for name, values in results.items():
        lines.append(f"| {name} | {len(values)} | {statistics.median(values) * 1000:.1f} | "
                     f"{pct(values, 0.99) * 1000:.1f} | {max(values) * 1000:.1f} |")
    base = results[baseline]
    for name, values in results.items():
        if name != baseline:
            lines.append(
                f"| **{name} / {baseline}** | | "
                f"**{statistics.median(values) / statistics.median(base):.2f}** | "
                f"**{pct(values, 0.99) / pct(base, 0.99):.2f}** | "
                f"{max(values) / max(base):.2f} |")
    return lines


CallsFor = Callable[[str], list[Call]]
"""The burst for one app (fresh nonces and event ids for each)."""


@dataclass
class Measured:
    """Latencies per app (measured rounds only) and what the replies said."""

    latencies: dict[str, list[float]]
    replies: dict[str, Counter[str]]
    rounds: list[str]
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds each app's process used during its measured bursts (when its pid was
    given): the first request sent → the last reply in."""
    settled_cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds each app used from its burst's first request until the round had
    settled (askhuman: every decision, refusal, card update and resume included)."""

    def cpu_line(self) -> str:
        """CPU per request of each app during its bursts, and until its rounds settled,
        for the table's notes."""
        def per(seconds: dict[str, float]) -> str:
            return ", ".join(f"{name} {s / len(self.latencies[name]) * 1000:.2f} ms"
                             for name, s in seconds.items() if self.latencies[name])
        return (f"CPU per request during the bursts (all threads): {per(self.cpu)}; "
                f"until each round had settled: {per(self.settled_cpu)}")


def _spy(profile: Path | None, app: str, round_no: int, pid: int | None
         ) -> subprocess.Popen[bytes] | None:
    """py-spy recording askhuman (``pid``) for one measured burst, or None."""
    if profile is None or app != "askhuman" or not round_no or not pid:
        return None
    return cpu_profile.record(pid, profile / f"burst-{round_no}.txt", rate=250)


async def measure_rounds(
    apps: dict[str, str], rounds: int, db: Path,
    prepare: Callable[[int], Awaitable[tuple[list[str], CallsFor]]],
    read_reply: Callable[[str, bytes], str], pause: float = 0.5,
    pids: dict[str, int] | None = None, profile: Path | None = None,
) -> Measured:
    """Round 0 warms every app up and is not counted; then ``rounds`` measured rounds.

    Each round, ``prepare(n)`` makes askhuman post the cards (their refs) and says what
    to send; every app (``name → base URL``) gets its burst, in an order that
    alternates between rounds, each after ``pause`` seconds; then askhuman must have
    decided every ref exactly once and finished its follow-up work before the next
    round. ``read_reply(app, body)`` raises on a bad reply and names what it said.
    With ``pids`` (app → process id), the CPU each app used during its bursts is kept;
    with ``profile`` (a directory) too, askhuman's process is recorded by py-spy during
    each measured burst (``cpu_profile.record``; one file per round), and nothing else.
    """
    measured = Measured({name: [] for name in apps}, {name: Counter() for name in apps}, [])
    for n in range(rounds + 1):
        refs, calls_for = await prepare(n)
        before: dict[str, float] = {}
        for name in interleaved(n, list(apps)):
            await asyncio.sleep(pause)
            pid = (pids or {}).get(name)
            spy = _spy(profile, name, n, pid)
            if spy is not None:
                await asyncio.sleep(0.5)  # py-spy attaches first: the burst's start counts
            used = before[name] = cpu_seconds(pid) if pid else 0.0
            latencies, bodies = await burst(apps[name], calls_for(name))
            if spy is not None:
                cpu_profile.finish(spy)
            if pid and n:
                measured.cpu[name] = measured.cpu.get(name, 0.0) + cpu_seconds(pid) - used
            said = [read_reply(name, body) for body in bodies]
            if os.environ.get("BENCH_VERBOSE"):
                ms = sorted(round(x * 1000) for x in latencies)
                print(f"round {n} {name}: ms {ms[::10]} … {ms[-3:]}", file=sys.stderr)
            if n:
                measured.latencies[name] += latencies
                measured.replies[name].update(said)
        counts = await settle(db, refs)
        for name, used in before.items():
            pid = (pids or {}).get(name)
            if pid and n:
                measured.settled_cpu[name] = (measured.settled_cpu.get(name, 0.0)
                                              + cpu_seconds(pid) - used)
        wrong = {ref: c for ref, c in counts.items() if c != 1}
        if wrong:
            raise RuntimeError(f"round {n}: decisions per request not 1: {wrong}")
        measured.rounds.append(f"round {n}{' (warm-up)' if not n else ''}: "
                               f"{len(refs)} request(s), each decided once")
    return measured
