"""Everything the API refuses, as RFC 9457 problem+json, and the admin CLI for keys."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from bot.askhuman.config import AskHumanConfig
from bot.askhuman.tool import validate_and_normalize_args
from bot.cli import app
from tests.api.conftest import (
    DEPLOY_ARGS,
    SECRET_KEY,
    Client,
    Door,
    add_client,
    make_settings,
    running_door,
)
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI

runner = CliRunner()


def problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["type"] == f"urn:askhuman:problem:{slug}" and body["status"] == status
    assert body["title"] and body["detail"]
    return body


async def test_keys_are_required_and_checked(door: Door, ci: Client) -> None:
    body = {"route": "ops", "args": DEPLOY_ARGS}
    missing = await door.http.post(door.api("/requests"), json=body)
    problem(missing, 401, "unauthorized")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = await door.http.post(door.api("/requests"), json=body,
                                 headers={"Authorization": "Bearer ahk_not-a-real-key"})
    problem(wrong, 401, "unauthorized")
    basic = await door.http.post(door.api("/requests"), json=body,
                                 headers={"Authorization": f"Basic {ci.key}"})
    problem(basic, 401, "unauthorized")
    huge = await door.http.get(door.api("/requests"),
                               headers={"Authorization": "Bearer " + "x" * 5000})
    problem(huge, 401, "unauthorized")
    assert (await door.http.get(door.api("/me"), headers=ci.headers)).json()["name"] == "ci-bot"


async def test_foreign_route_and_unknown_route_are_refused(door: Door) -> None:
    fin_only = add_client(door.database, "fin-only", ["fin", "gone"])
    foreign = await door.create(fin_only, {"route": "ops", "args": DEPLOY_ARGS})
    assert "may not use route 'ops'" in problem(foreign, 403, "route-not-allowed")["detail"]
    gone = await door.create(fin_only, {"route": "gone", "args": DEPLOY_ARGS})
    problem(gone, 422, "unknown-route")
    await asyncio.sleep(0.2)
    assert not [c for c in door.slack.fake.calls_to("chat.postMessage") if c.body.get("blocks")]


async def test_oversize_bodies_get_413_before_parsing(door: Door, ci: Client) -> None:
    big = b'{"route": "ops", "args": {"question": "' + b"x" * (1024 * 1024 + 10) + b'"}}'
    declared = await door.http.post(door.api("/requests"), content=big,
                                    headers={**ci.headers, "content-type": "application/json"})
    assert problem(declared, 413, "body-too-large")["max_bytes"] == 1024 * 1024

    async def chunks() -> Any:
        for start in range(0, len(big), 65536):
            yield big[start:start + 65536]

    streamed = await door.http.post(door.api("/requests"), content=chunks(),
                                    headers={**ci.headers, "content-type": "application/json"})
    problem(streamed, 413, "body-too-large")
    # Not JSON / not an object: 400. Unknown keys: 422 naming them.
    problem(await door.http.post(door.api("/requests"), content=b"{nope",
                                 headers=ci.headers), 400, "bad-json")
    problem(await door.http.post(door.api("/requests"), json=[1, 2], headers=ci.headers),
            400, "bad-request")
    extra = await door.create(ci, {"route": "ops", "args": DEPLOY_ARGS, "approvers": ["me"]})
    assert "approvers" in problem(extra, 422, "invalid-body")["detail"]


@pytest.mark.parametrize("args", [
    {**DEPLOY_ARGS, "fields": [{"type": "paragraph", "name": f"f{i}", "label": "x"}
                               for i in range(9)]},
    {**DEPLOY_ARGS, "fields": [{"type": "number", "name": "n", "label": "N"}]},
    {**DEPLOY_ARGS, "question": "q" * 1001},
    {"question": ""},
    {"question": "ok", "fields": [{"type": "select", "name": "s", "label": "S", "options": []}]},
    {"question": "ok", "extra": 1},
])
async def test_bad_args_get_422_with_difys_error_text(
    door: Door, ci: Client, args: dict[str, Any]
) -> None:
    with pytest.raises(ValueError) as expected:
        validate_and_normalize_args(args, AskHumanConfig())
    response = await door.create(ci, {"route": "ops", "args": args})
    assert problem(response, 422, "invalid-args")["detail"] == str(expected.value)


async def test_rate_limit_gives_429_with_retry_after(door: Door) -> None:
    slow = add_client(door.database, "slow", ["fin"], rate_limit=2)
    codes = [(await door.http.get(door.api("/requests"), headers=slow.headers)).status_code
             for _ in range(3)]
    assert codes == [200, 200, 429]
    limited = await door.http.get(door.api("/requests"), headers=slow.headers)
    problem(limited, 429, "rate-limited")
    assert int(limited.headers["retry-after"]) >= 1


async def test_callbacks_to_private_addresses_are_refused(door: Door, ci: Client) -> None:
    for url, reason in [
        ("http://10.1.2.3/hook", "not on the allow-list"),
        ("http://192.168.0.10:8080/hook", "not on the allow-list"),
        ("http://[::1]/hook", "not on the allow-list"),
        ("http://169.254.169.254/latest/meta-data", "not on the allow-list"),
        ("file:///etc/passwd", "https://"),
        ("http://user:pw@127.0.0.1/hook", "credentials"),
    ]:
        response = await door.create(ci, {"route": "ops", "args": DEPLOY_ARGS,
                                          "callback_url": url})
        assert reason in problem(response, 422, "callback-refused")["detail"], url
    await asyncio.sleep(0.2)
    assert not [c for c in door.slack.fake.calls_to("chat.postMessage") if c.body.get("blocks")]


async def test_a_listed_name_resolving_to_a_private_address_is_refused(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    settings = make_settings(f"sqlite:///{tmp_path / 'a.db'}",
                             callback_hosts=["localhost", "169.254.0.0/16"])
    async with running_door(fake_slack, fake_feishu, settings) as door:
        client = add_client(door.database, "c", ["ops"])
        by_name = await door.create(client, {"route": "ops", "args": DEPLOY_ARGS,
                                             "callback_url": "http://localhost:9/hook"})
        detail = problem(by_name, 422, "callback-refused")["detail"]
        assert "resolves to a private, loopback" in detail and "127.0.0.1" in detail
        metadata = await door.create(client, {"route": "ops", "args": DEPLOY_ARGS,
                                              "callback_url": "http://169.254.169.254/x"})
        assert "metadata" in problem(metadata, 422, "callback-refused")["detail"]


async def test_openapi_document(door: Door) -> None:
    response = await door.http.get(door.api("/openapi.json"))
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"].startswith("3.1")
    assert {"/api/v1/requests", "/api/v1/requests/{ref}", "/api/v1/requests/{ref}/cancel",
            "/api/v1/approvals", "/api/v1/runs", "/api/v1/runs/{run_id}"} <= set(doc["paths"])
    schemas = doc["components"]["schemas"]
    assert {"AskHumanToolArgs", "AskHumanToolResult", "Problem", "Request"} <= set(schemas)
    refs = re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', str(doc).replace("'", '"'))
    assert refs and all(name in schemas for name in refs)
    post = doc["paths"]["/api/v1/requests"]["post"]["responses"]
    assert {"201", "400", "401", "403", "409", "413", "422", "429"} <= set(post)


def test_api_key_cli_stores_only_a_hash_and_a_sealed_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "askhuman.yaml"
    db = tmp_path / "keys.db"
    config.write_text(
        f"database_url: sqlite:///{db}\n"
        "agents: {deploy: {model: 'scripted:deploy', route: ops}}\n"
        "routes: {ops: {console: {}}, fin: {console: {}}}\n")
    monkeypatch.delenv("ASKHUMAN_SECRET_KEY", raising=False)
    no_key = runner.invoke(app, ["api-key", "create", "ci", "--routes", "ops",
                                 "--config", str(config)])
    assert no_key.exit_code == 2 and "ASKHUMAN_SECRET_KEY is not set" in no_key.output
    monkeypatch.setenv("ASKHUMAN_SECRET_KEY", SECRET_KEY)
    bad_route = runner.invoke(app, ["api-key", "create", "ci", "--routes", "ops,nope",
                                    "--config", str(config)])
    assert bad_route.exit_code == 2 and "route 'nope' is not defined" in bad_route.output
    created = runner.invoke(app, ["api-key", "create", "ci", "--routes", "ops,fin", "--agents",
                                  "deploy", "--config", str(config)])
    assert created.exit_code == 0, created.output
    key = re.search(r"API key:\s+(ahk_\S+)", created.output)
    secret = re.search(r"Webhook secret:\s+(whsec_\S+)", created.output)
    assert key and secret
    twice = runner.invoke(app, ["api-key", "create", "ci", "--routes", "ops",
                                "--config", str(config)])
    assert twice.exit_code == 2 and "already exists" in twice.output
    listed = runner.invoke(app, ["api-key", "list", "--config", str(config)])
    assert "ci" in listed.output and "active" in listed.output
    assert key.group(1) not in listed.output and key.group(1)[:10] in listed.output
    rotated = runner.invoke(app, ["api-key", "rotate-secret", "ci", "--config", str(config)])
    new_secret = re.search(r"(whsec_\S+)", rotated.output)
    assert rotated.exit_code == 0 and new_secret and new_secret.group(1) != secret.group(1)
    revoked = runner.invoke(app, ["api-key", "revoke", "ci", "--config", str(config)])
    assert revoked.exit_code == 0 and "Revoked 'ci'" in revoked.output
    assert "revoked" in runner.invoke(app, ["api-key", "list", "--config", str(config)]).output
    unknown = runner.invoke(app, ["api-key", "revoke", "nobody", "--config", str(config)])
    assert unknown.exit_code == 2 and "no API client named" in unknown.output
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("keys.db*"))
    for plaintext in (key.group(1), secret.group(1), new_secret.group(1),
                      secret.group(1).removeprefix("whsec_")):
        assert plaintext.encode() not in stored


async def test_revoked_key_is_refused_at_once(door: Door, ci: Client) -> None:
    from bot.engine import api_clients

    assert (await door.http.get(door.api("/requests"), headers=ci.headers)).status_code == 200
    api_clients.revoke(door.database, "ci-bot")
    problem(await door.http.get(door.api("/requests"), headers=ci.headers), 401, "unauthorized")
    problem(await door.create(ci, {"route": "ops", "args": DEPLOY_ARGS}), 401, "unauthorized")


async def test_responses_match_the_openapi_schemas(door: Door, ci: Client) -> None:
    from jsonschema import Draft202012Validator
    from referencing import Registry

    doc = (await door.http.get(door.api("/openapi.json"))).json()
    registry = Registry().with_resource("urn:askhuman:openapi", _resource(doc))

    def check(name: str, instance: Any) -> None:
        schema = {"$ref": f"urn:askhuman:openapi#/components/schemas/{name}"}
        Draft202012Validator(schema, registry=registry).validate(instance)

    for schema in doc["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)
    check("CreateRequest", {"route": "ops", "args": DEPLOY_ARGS})
    created = await door.create(ci, {"route": "ops", "args": DEPLOY_ARGS})
    check("Request", created.json())
    listed = await door.http.get(door.api("/requests"), headers=ci.headers)
    check("RequestList", listed.json())
    problem_body = (await door.create(ci, {"route": "nope", "args": DEPLOY_ARGS})).json()
    check("Problem", problem_body)
    with pytest.raises(Exception):  # noqa: B017 - jsonschema's ValidationError
        check("CreateRequest", {"route": "ops", "args": {"question": "q", "bad": 1}})


def _resource(doc: dict[str, Any]) -> Any:
    from referencing import Resource
    from referencing.jsonschema import DRAFT202012

    return Resource(contents=doc, specification=DRAFT202012)
