"""``askhuman serve --workers N`` (uvicorn's workers, one port) and the ``serve
--no-background`` / ``askhuman worker`` split, as real processes on SQLite and
PostgreSQL: racing clicks decide each request once, resume it once and post its
answer once; a worker killed with SIGKILL mid-stream loses nothing acknowledged and
the survivors finish its work.

Which worker accepts a connection is the kernel's choice, and it often gives a whole
burst to one; so the racing clicks go through connections pinned to each worker
(``workers_harness.pinned``), and the test checks that every worker stored some (the
``holder`` of the stored clicks) as well as every guarantee.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import httpx
import pytest

from storage import Database
from tests.fakes.asgi_server import free_port
from tests.slack.conftest import ALICE, BOB, CAROL, Slack
from tests.slack.workers_harness import (
    askhuman,
    card_updates,
    click_holders,
    client,
    decided,
    fake_slack,
    final_answers,
    live_instances,
    pinned,
    post_cards,
    resumed,
    settled,
    slack_env,
    stop,
    until,
    wait_healthy,
    write_config,
)

APPROVERS = (ALICE, BOB, CAROL)


async def _race(slacks: list[Slack], ts_list: list[str], per_card: int
                ) -> list[httpx.Response]:
    """``per_card`` approvers click Approve on every card, all at once, the clicks dealt
    round the clients in turn (with ``pinned`` ones, a card's clicks reach different
    processes)."""
    clicks = [(ts, APPROVERS[i % 3]) for ts in ts_list for i in range(per_card)]
    return list(await asyncio.gather(*(
        slacks[n % len(slacks)].interact(slacks[0].click_payload(ts, "Approve", user))
        for n, (ts, user) in enumerate(clicks))))


@pytest.mark.parametrize("workers", [2, 4])
async def test_racing_clicks_on_n_workers_decide_resume_and_post_once(
    tmp_path: Path, db_url: str, workers: int,
) -> None:
    database = Database(db_url)
    port = free_port()
    with fake_slack() as fake:
        config = write_config(tmp_path, db_url)
        proc = askhuman(["serve", "--config", str(config), "--port", str(port),
                         "--workers", str(workers), "--log-level", "warning"], slack_env(fake))
        try:
            url = f"http://127.0.0.1:{port}"
            await wait_healthy(url, proc)
            await until(lambda: len(live_instances(database)) == workers, 60,
                        f"{workers} workers beating")
            async with client(url, fake) as slack:
                ts_list = await post_cards(slack, 8, database)
                pids = [pid for _, pid in live_instances(database)]
                async with pinned(url, fake, pids, 24 // workers) as slacks:  # 8 × 3 clicks
                    replies = await _race(slacks, ts_list, 3)
                assert [r.status_code for r in replies] == [200] * len(replies)
                await until(lambda: len(final_answers(fake)) >= 8 and settled(database), 60,
                            "every run answered")
                await asyncio.sleep(1)  # nothing more arrives
            assert decided(database) == 8 and resumed(database) == 8
            answers = final_answers(fake)
            assert len(answers) == 8 and len({thread for thread, _ in answers}) == 8
            assert card_updates(fake) == {ts: 1 for ts in ts_list}
            assert click_holders(database) == {i for i, _ in live_instances(database)}
        finally:
            tail = stop(proc)
            database.dispose()
        assert proc.returncode == 0, tail


async def test_kill_9_of_one_worker_mid_stream_loses_nothing(
    tmp_path: Path, db_url: str,
) -> None:
    database = Database(db_url)
    port = free_port()
    with fake_slack() as fake:
        config = write_config(tmp_path, db_url)
        proc = askhuman(["serve", "--config", str(config), "--port", str(port),
                         "--workers", "2", "--log-level", "warning"], slack_env(fake))
        try:
            url = f"http://127.0.0.1:{port}"
            await wait_healthy(url, proc)
            await until(lambda: len(live_instances(database)) == 2, 60, "2 workers beating")
            victim_id, victim = live_instances(database)[0]
            async with client(url, fake) as slack:
                ts_list = await post_cards(slack, 12)
                pending = [asyncio.ensure_future(
                    slack.interact(slack.click_payload(ts, "Approve", ALICE)))
                    for ts in ts_list]
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                os.kill(victim, signal.SIGKILL)  # clicks, decisions and resumes in flight
                done = await asyncio.gather(*pending, return_exceptions=True)
                acked = [ts for ts, reply in zip(ts_list, done, strict=True)
                         if isinstance(reply, httpx.Response) and reply.status_code == 200]
                assert acked, "no click was acknowledged"
                for ts in set(ts_list) - set(acked):  # not acked: the person clicks again
                    again = await slack.interact(slack.click_payload(ts, "Approve", ALICE))
                    assert again.status_code == 200
                await until(lambda: len(final_answers(fake)) >= 12 and settled(database), 60,
                            "the survivors finishing every run")
                await asyncio.sleep(1)
            assert decided(database) == 12 and resumed(database) == 12
            answers = final_answers(fake)
            assert len(answers) == 12 and len({thread for thread, _ in answers}) == 12
            assert set(card_updates(fake)) == set(ts_list)
            # The survivor noticed the dead heartbeat; uvicorn started a replacement.
            await until(lambda: victim_id not in {i for i, _ in live_instances(database)}
                        and len(live_instances(database)) == 2, 60,
                        "the victim reaped and replaced")
        finally:
            tail = stop(proc)
            database.dispose()
        assert proc.returncode == 0, tail


async def test_web_processes_and_a_worker_split_the_work(tmp_path: Path, db_url: str) -> None:
    """``serve --no-background`` decides clicks and updates cards; the resume and the
    final answer are the worker's."""
    database = Database(db_url)
    port, health = free_port(), free_port()
    with fake_slack() as fake:
        config = write_config(tmp_path, db_url)
        env = slack_env(fake)
        web = askhuman(["serve", "--config", str(config), "--port", str(port),
                        "--no-background", "--log-level", "warning"], env)
        worker = None
        try:
            url = f"http://127.0.0.1:{port}"
            await wait_healthy(url, web)  # /healthz may answer before the first beat
            await until(lambda: len(live_instances(database)) == 1, 30, "the web process beating")
            (web_id, _), = live_instances(database)
            worker = askhuman(["worker", "--config", str(config), "--port", str(health),
                               "--log-level", "warning"], env)
            await wait_healthy(f"http://127.0.0.1:{health}", worker)
            async with client(url, fake) as slack:
                ts_list = await post_cards(slack, 3, database)
                replies = await _race([slack], ts_list, 2)
                assert [r.status_code for r in replies] == [200] * 6
                await until(lambda: len(final_answers(fake)) >= 3 and settled(database), 30,
                            "the worker resuming every run")
            assert decided(database) == 3 and resumed(database) == 3
            assert click_holders(database) == {web_id}
            assert len(final_answers(fake)) == 3
            assert card_updates(fake) == {ts: 1 for ts in ts_list}
            async with httpx.AsyncClient() as http:  # a worker mounts no platform endpoint
                assert (await http.post(f"http://127.0.0.1:{health}/slack/events")
                        ).status_code == 404
        finally:
            tails = [stop(p) for p in (web, worker) if p is not None]
            database.dispose()
        assert web.returncode == 0 and worker is not None and worker.returncode == 0, tails


def test_workers_refuse_socket_mode_naming_the_flag_and_the_fix(tmp_path: Path) -> None:
    with fake_slack() as fake:
        config = write_config(tmp_path, f"sqlite:///{tmp_path / 'a.db'}")
        proc = askhuman(["serve", "--config", str(config), "--workers", "2"],
                        slack_env(fake, SLACK_APP_TOKEN="xapp-1-test"))
        _, raw = proc.communicate(timeout=60)
        err = raw.decode()
    assert proc.returncode == 2, err
    assert "--workers 2 cannot be used with Slack Socket Mode (SLACK_APP_TOKEN" in err
    assert "`askhuman worker`" in err and "unset SLACK_APP_TOKEN" in err


async def test_a_worker_never_opens_the_socket_mode_connection(tmp_path: Path) -> None:
    """Beside one Socket Mode ``serve``, a worker with the same environment sends but
    never connects: the app holds exactly one connection."""
    health = free_port()
    with fake_slack() as fake:
        fake.enable_socket_mode()
        config = write_config(tmp_path, f"sqlite:///{tmp_path / 'a.db'}")
        worker = askhuman(["worker", "--config", str(config), "--port", str(health)],
                          slack_env(fake, SLACK_APP_TOKEN="xapp-1-test"))
        try:
            await wait_healthy(f"http://127.0.0.1:{health}", worker)
            await asyncio.sleep(1)
            assert not fake.calls_to("apps.connections.open") and not fake.socket_connected
        finally:
            tail = stop(worker)
        assert worker.returncode == 0, tail


def _proc(pid: int, name: str) -> str:
    return Path(f"/proc/{pid}/{name}").read_text()


def _open_files(pid: int) -> list[str]:
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):  # closed meanwhile
            found.append(os.readlink(fd))
    return found


async def test_workers_are_forks_of_a_parent_holding_no_database_lock_or_thread(
    tmp_path: Path,
) -> None:
    """gunicorn's arbiter preloads and forks (not a fresh interpreter per worker); it
    migrated and closed the database first, so each worker's connections and SQLite
    writer lock (a ``flock``, shared by whoever inherits its descriptor) are its own."""
    db_file = tmp_path / "a.db"
    database = Database(f"sqlite:///{db_file}")
    port = free_port()
    with fake_slack() as fake:
        config = write_config(tmp_path, f"sqlite:///{db_file}")
        proc = askhuman(["serve", "--config", str(config), "--port", str(port),
                         "--workers", "2", "--log-level", "warning"], slack_env(fake))
        try:
            url = f"http://127.0.0.1:{port}"
            await wait_healthy(url, proc)
            await until(lambda: len(live_instances(database)) == 2, 60, "2 workers beating")
            async with client(url, fake) as slack:
                ts_list = await post_cards(slack, 4)
                await _race([slack], ts_list, 1)
                await until(lambda: len(final_answers(fake)) >= 4, 60, "every run answered")
            for _, pid in live_instances(database):  # each has written (its heartbeat)
                status = dict(line.split(":\t", 1) for line in _proc(pid, "status").splitlines())
                assert int(status["PPid"]) == proc.pid
                assert _proc(pid, "cmdline") == _proc(proc.pid, "cmdline"), "not a fork"
                assert f"{db_file}-writer" in _open_files(pid)
            assert len(list(Path(f"/proc/{proc.pid}/task").iterdir())) == 1
            assert not [f for f in _open_files(proc.pid) if f.startswith(str(db_file))]
        finally:
            tail = stop(proc)
            database.dispose()
        assert proc.returncode == 0, tail


def test_workers_print_a_platform_config_error_before_forking(tmp_path: Path) -> None:
    with fake_slack() as fake:
        config = write_config(tmp_path, f"sqlite:///{tmp_path / 'a.db'}")
        env = slack_env(fake)
        del env["SLACK_SIGNING_SECRET"]
        proc = askhuman(["serve", "--config", str(config), "--workers", "2"], env)
        _, raw = proc.communicate(timeout=60)
        err = raw.decode()
    assert proc.returncode == 2, err
    assert "SLACK_SIGNING_SECRET is not set" in err
    assert "gunicorn" not in err and not (tmp_path / "a.db").exists()


async def test_sighup_to_the_parent_replaces_the_workers(tmp_path: Path) -> None:
    """gunicorn starts new workers (each builds its app, re-reading the config) and then
    stops the old ones gracefully: they sign off, and the parent keeps serving. A
    config file broken meanwhile is refused by the new workers, which keep the one the
    server started with, instead of failing to boot (which would halt the server)."""
    database = Database(f"sqlite:///{tmp_path / 'a.db'}")
    port = free_port()
    with fake_slack() as fake:
        config = write_config(tmp_path, f"sqlite:///{tmp_path / 'a.db'}")
        proc = askhuman(["serve", "--config", str(config), "--port", str(port),
                         "--workers", "2", "--log-level", "warning"], slack_env(fake))
        try:
            url = f"http://127.0.0.1:{port}"
            await wait_healthy(url, proc)
            await until(lambda: len(live_instances(database)) == 2, 60, "2 workers beating")
            old = {pid for _, pid in live_instances(database)}
            config.write_text("routes: {ops: {timeout: never}}\n")
            os.kill(proc.pid, signal.SIGHUP)
            await until(lambda: len(live_instances(database)) == 2
                        and not old & {pid for _, pid in live_instances(database)}, 60,
                        "2 new workers, the old ones signed off")
            await wait_healthy(url, proc)
            async with client(url, fake) as slack:  # still the config it started with
                ts_list = await post_cards(slack, 1)
                await _race([slack], ts_list, 1)
                await until(lambda: len(final_answers(fake)) >= 1, 60, "the run answered")
        finally:
            tail = stop(proc)
            database.dispose()
        assert proc.returncode == 0, tail
        assert "config reload refused; this worker keeps the config" in tail
