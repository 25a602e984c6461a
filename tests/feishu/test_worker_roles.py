"""Feishu with several processes: ``serve --workers N`` refuses the long connection
(each worker would open one), and ``askhuman worker``, which only sends, never opens it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.commands import serve_workers
from bot.commands.roles import ReceiverError, check_workers
from bot.platforms.feishu import build_feishu_platform
from tests.feishu.conftest import make_settings

ENV = {"FEISHU_APP_ID": "cli_a", "FEISHU_APP_SECRET": "s3cret-value"}
HTTP_ENV = {**ENV, "FEISHU_MODE": "http", "FEISHU_ENCRYPT_KEY": "k",
            "FEISHU_VERIFICATION_TOKEN": "t"}


class _Engine:
    def register_adapter(self, adapter: Any, directory: Any = None) -> None:
        pass


def test_workers_refuse_the_long_connection_naming_the_flag_and_the_fix(
    tmp_path: Path,
) -> None:
    settings = make_settings(f"sqlite:///{tmp_path / 'a.db'}")
    with pytest.raises(ReceiverError) as refused:
        check_workers(3, settings, ENV)
    message = str(refused.value)
    assert message.startswith("--workers 3 cannot be used with the Feishu long connection "
                              "(FEISHU_MODE is ws, the default)")
    assert "FEISHU_MODE=http" in message and "`askhuman worker`" in message
    check_workers(1, settings, ENV)  # one process: the connection is one
    check_workers(3, settings, HTTP_ENV)  # callbacks over HTTP spread over the workers


def test_workers_take_a_metrics_port_and_refuse_an_in_memory_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The arbiter binds ``metrics.port`` once for every worker (``shared_metrics``)."""
    for name, value in HTTP_ENV.items():
        monkeypatch.setenv(name, value)
    settings = make_settings(f"sqlite:///{tmp_path / 'a.db'}")
    with_port = settings.model_copy(update={"metrics": settings.metrics.model_copy(
        update={"enabled": True, "port": 9464})})
    serve_workers.check(2, with_port)
    in_memory = settings.model_copy(update={"database_url": "sqlite://"})
    with pytest.raises(ReceiverError, match="in-memory SQLite database_url"):
        serve_workers.check(2, in_memory)


async def test_a_worker_starts_feishu_without_the_long_connection(tmp_path: Path) -> None:
    settings = make_settings(f"sqlite:///{tmp_path / 'a.db'}")
    platform = build_feishu_platform(settings, _Engine(), ENV)
    platform.approver_entries = []  # nothing to resolve: no API call
    await platform.start(receive=False)
    try:
        assert platform._long_connection is None
    finally:
        await platform.stop()
        await platform.aclose()
