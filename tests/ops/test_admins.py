"""``admins:`` may withdraw any pending request; others only their own runs'."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.engine import Identity
from bot.settings import ConfigError, load_settings
from tests.engine.helpers import ORIGIN, STARTER, make_engine
from tests.ops.conftest import ops_config


async def test_an_admin_withdraws_a_request_a_stranger_cannot(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url)
    engine.settings = engine.settings.model_copy(update={
        "admins": engine.settings.admins.model_copy(update={"slack": ["U_ADMIN"]})})
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    stranger = await engine.cancel(ref, Identity("slack", "U_EVE"), "nope")
    assert stranger.outcome == "rejected"
    # The same user id on another platform is not the admin.
    assert (await engine.cancel(ref, Identity("feishu", "U_ADMIN"), "x")).outcome \
        == "rejected"
    done = await engine.cancel(ref, Identity("slack", "U_ADMIN", "Ada"), "stuck")
    assert done.outcome == "accepted" and done.card is not None
    assert done.card.status == "cancelled"
    await engine.run_worker_once()
    assert "stuck" in adapter.results[0][1] and "Ada" in adapter.results[0][1]


def test_admins_config_shape_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "askhuman.yaml"
    values = ops_config("sqlite:///x.db")
    values["admins"] = {"slack": ["U0ADMIN"], "feishu": ["ou_admin"]}
    path.write_text(yaml.safe_dump(values))
    assert load_settings(path).admins.includes("feishu", "ou_admin")
    values["admins"] = {"teams": ["x"]}
    path.write_text(yaml.safe_dump(values))
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert "admins.teams" in str(caught.value)
