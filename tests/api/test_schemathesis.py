"""The live API does exactly what its OpenAPI document says (schemathesis).

``askhuman serve``'s app runs under uvicorn on 127.0.0.1 with real SQLite and fake
Slack/Feishu (``tests/api/conftest.py``); the schemathesis CLI loads the document
from the server's own URL, with an API key, and runs every phase (coverage,
fuzzing, stateful through the document's links) with every check except
``positive_data_acceptance`` (JSON Schema cannot say "field names are unique" or
"the callback host is allowed", so some schema-valid bodies are rightly refused):
no 5xx, no undocumented status, header or content type, responses within their
schemas, invalid data refused (negative testing), 401 without the key
(``ignored_auth``), 405 with ``Allow`` for other methods. A fixed seed, one worker
and small example counts keep it deterministic and well under a minute on CI.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from tests.api.conftest import Door, add_client

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
OPERATIONS = ("get", "post")
ROOT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("schemathesis.toml")


async def test_the_live_api_keeps_its_openapi_document(door: Door, tmp_path: Path) -> None:
    ci = add_client(door.database, "ci-bot", ["ops", "fin"], ["deploy"], rate_limit=1_000_000)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    process = await asyncio.create_subprocess_exec(
        SCHEMATHESIS, "--config-file", str(CONFIG), "--no-color", "run",
        door.api("/openapi.json"), "--header", f"Authorization: Bearer {ci.key}",
        "--checks", "all", "--exclude-checks", "positive_data_acceptance",
        "--phases", "examples,coverage,fuzzing,stateful",
        cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    output, _ = await asyncio.wait_for(process.communicate(), timeout=85)
    text = output.decode(errors="replace")
    (tmp_path / "schemathesis.txt").write_text(text)
    report = "\n".join(line[:300] for line in text.splitlines())  # bodies can be 1 MiB
    assert process.returncode == 0, report[-15000:]
    assert "API Links:" in text and " 0 covered" not in text, report[-4000:]


async def test_every_operation_answers_401_problem_without_a_key(door: Door) -> None:
    document = (await door.http.get(door.api("/openapi.json"))).json()
    checked = 0
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method not in OPERATIONS or operation.get("security") == []:
                continue
            assert "401" in operation["responses"], (method, path)
            url = door.url + path.replace("{ref}", "r").replace("{run_id}", "r")
            response = await door.http.request(method.upper(), url, json={})
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            assert response.headers["www-authenticate"].startswith("Bearer")
            checked += 1
    assert checked >= 9


async def test_other_methods_answer_405_with_allow_and_unknown_paths_404(door: Door) -> None:
    put = await door.http.put(door.api("/requests"))
    assert put.status_code == 405 and put.headers["allow"] == "GET, POST"
    assert put.headers["content-type"] == "application/problem+json"
    unknown = await door.http.get(door.api("/nope"))
    assert unknown.status_code == 404
    assert unknown.json()["type"] == "urn:askhuman:problem:not-found"


def _status_codes(document: dict[str, Any]) -> set[str]:
    return {code for item in document["paths"].values() for op in item.values()
            for code in op.get("responses", {})}


async def test_the_cancel_400_is_documented(door: Door) -> None:
    """The issue's example: a non-object body to cancel is 400, and the document says so."""
    ci = add_client(door.database, "ci-bot", ["ops"])
    document = (await door.http.get(door.api("/openapi.json"))).json()
    cancel = document["paths"]["/api/v1/requests/{ref}/cancel"]["post"]["responses"]
    assert cancel["400"]["content"] == {"application/problem+json": {
        "schema": {"$ref": "#/components/schemas/Problem"}}}
    response = await door.http.post(door.api("/requests/x/cancel"), content=b"[1]",
                                     headers=ci.headers)
    assert response.status_code == 400
    assert {"200", "201", "202", "400", "401", "404", "429", "500"} <= _status_codes(document)
