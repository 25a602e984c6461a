"""The multiprocess directory of ``serve --workers N`` (``bot.commands.shared_metrics``):
private and removed at exit unless the admin names one, emptied of earlier runs'
files only, and a dead worker's live gauges dropped by gunicorn's ``child_exit``."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

from bot.commands.shared_metrics import ENV, MetricsDirectory


def test_a_private_directory_is_the_arbiters_only_and_removed_at_exit() -> None:
    env: dict[str, str] = {}
    directory = MetricsDirectory.open(env)
    try:
        assert env[ENV] == str(directory.path) and directory.owned
        assert stat.S_IMODE(directory.path.stat().st_mode) == 0o700
        (directory.path / "counter_123.db").write_bytes(b"x")
        directory.owner = os.getpid() + 1  # a worker leaving through the same stack
        directory.close()
        assert directory.path.is_dir()
        directory.owner = os.getpid()
        directory.close()
        assert not directory.path.exists()
    finally:
        directory.owner = os.getpid()
        directory.close()


def test_the_admins_directory_is_emptied_of_metrics_files_only_and_kept(
    tmp_path: Path,
) -> None:
    given = tmp_path / "prom"
    given.mkdir()
    stale = ["counter_1.db", "histogram_1.db", "gauge_livesum_1.db", "gauge_all_2.db"]
    for name in [*stale, "askhuman.db", "notes.txt"]:
        (given / name).write_bytes(b"x")
    env = {ENV: str(given)}
    directory = MetricsDirectory.open(env)
    assert env[ENV] == str(given) and not directory.owned
    assert sorted(p.name for p in given.iterdir()) == ["askhuman.db", "notes.txt"]
    directory.close()
    assert given.is_dir()


def test_a_missing_admin_directory_is_made(tmp_path: Path) -> None:
    given = tmp_path / "a" / "b"
    MetricsDirectory.open({ENV: str(given)})
    assert given.is_dir()


def test_a_dead_workers_live_gauges_go_and_its_counters_stay(tmp_path: Path) -> None:
    directory = MetricsDirectory.open({ENV: str(tmp_path)})
    for name in ("counter_7.db", "histogram_7.db", "gauge_livesum_7.db", "gauge_livesum_8.db"):
        (tmp_path / name).write_bytes(b"")
    directory.process_dead(None, SimpleNamespace(pid=7))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "counter_7.db", "gauge_livesum_8.db", "histogram_7.db"]
