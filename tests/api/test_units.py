"""Small parts of the door on their own: allow-list, secrets, limits, approvals, waiters."""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from typing import Any

import pytest

from bot.api.approval_args import approval_decision, approval_request, args_listing
from bot.api.callbacks import CallbackPolicy, CallbackRefused
from bot.api.keys import SecretBox, SecretKeyError, hash_key, new_api_key, new_webhook_secret
from bot.askhuman.schema import AskHumanToolArgs
from bot.engine.waiters import Waiters
from bot.logs import scrub
from bot.mcp.tools import elicitation_schema


@pytest.mark.parametrize(("entries", "url", "allowed"), [
    (["hooks.example.com:8443"], "https://hooks.example.com:8443/x", True),
    (["hooks.example.com:8443"], "https://hooks.example.com/x", False),
    (["HOOKS.example.com."], "https://hooks.Example.com./x", True),
    (["10.0.0.0/8"], "http://10.9.8.7/x", True),
    (["10.0.0.0/8"], "http://11.0.0.1/x", False),
    ([], "https://hooks.example.com/x", False),
])
def test_allow_list_matching(entries: list[str], url: str, allowed: bool) -> None:
    policy = CallbackPolicy(entries)
    if allowed:
        policy.check_url(url)
    else:
        with pytest.raises(CallbackRefused, match="not on the allow-list"):
            policy.check_url(url)


def test_private_and_metadata_addresses_need_explicit_listing() -> None:
    broad = CallbackPolicy(["0.0.0.0/0", "::/0"])
    assert broad.address_allowed(ipaddress.ip_address("10.1.1.1"))
    assert not broad.address_allowed(ipaddress.ip_address("169.254.169.254"))
    assert not broad.address_allowed(ipaddress.ip_address("fd00:ec2::254"))
    exact = CallbackPolicy(["169.254.169.254"])
    assert exact.address_allowed(ipaddress.ip_address("169.254.169.254"))
    none = CallbackPolicy([])
    for address in ("127.0.0.1", "10.0.0.1", "172.16.0.1", "192.168.1.1", "169.254.1.1",
                    "100.64.0.1", "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1",
                    "0.0.0.0", "224.0.0.1"):
        assert not none.address_allowed(ipaddress.ip_address(address)), address
    assert none.address_allowed(ipaddress.ip_address("93.184.216.34"))
    mapped = CallbackPolicy(["127.0.0.1"])
    assert mapped.address_allowed(ipaddress.ip_address("::ffff:127.0.0.1"))


async def test_resolution_checks_every_address_and_pins_the_first() -> None:
    policy = CallbackPolicy(["localhost:9999", "127.0.0.0/8"])
    target = await policy.resolve("http://localhost:9999/hook?x=1")
    assert str(target.address) in ("127.0.0.1", "::1") or target.address.is_loopback
    assert target.host_header == "localhost:9999"
    assert target.pinned_url().endswith(":9999/hook?x=1")
    with pytest.raises(CallbackRefused, match="longer than"):
        policy.check_url("http://localhost:9999/" + "a" * 3000)


def test_secret_box_binds_the_client_and_the_master_key() -> None:
    box = SecretBox("a" * 32)
    secret = new_webhook_secret()
    sealed = box.seal(secret, "ci")
    assert secret not in sealed and box.open(sealed, "ci") == secret
    with pytest.raises(SecretKeyError, match="rotate-secret ci"):
        SecretBox("b" * 32).open(sealed, "ci")
    with pytest.raises(SecretKeyError):
        box.open(sealed, "other")  # a ciphertext copied to another client does not open
    with pytest.raises(SecretKeyError, match="at least 16"):
        SecretBox("short")
    key = new_api_key()
    assert key.startswith("ahk_") and len(hash_key(key)) == 64 and hash_key(key) != key


def test_logs_never_show_keys_or_secrets() -> None:
    key, secret = new_api_key(), new_webhook_secret()
    text = scrub(f"auth {key} and {secret}")
    assert key not in text and secret not in text


def test_approval_request_is_safe_and_bounded() -> None:
    args: dict[str, Any] = {f"arg{i}": "x" * 2000 for i in range(30)}
    args["tricky"] = "````` <!here> [link](javascript:alert(1))"
    request = approval_request("Bash" * 100, args, "because " * 200)
    assert request.actions[0].id == "approve" and request.actions[1].id == "reject"
    assert request.markdown is not None and len(request.markdown) <= 8000
    assert "more argument(s) not shown" in request.markdown
    listing = args_listing({"tricky": "a ```` b"})
    assert listing.count("`````json") == 1  # the fence outlasts any backtick run inside
    assert args_listing({}) == "_No arguments._"


def test_approval_decisions() -> None:
    approve = {"status": "submitted", "action": {"id": "approve", "label": "Approve"},
               "values": {"reason": ""}}
    assert approval_decision("submitted", approve) == {"approved": True, "reason": "Approved."}
    reject = {**approve, "action": {"id": "reject", "label": "Reject"},
              "values": {"reason": "not on Friday"}}
    assert approval_decision("submitted", reject) == {"approved": False,
                                                      "reason": "not on Friday"}
    timeout = {"status": "timeout", "message": "The human did not respond before the "
               "workflow timeout."}
    assert approval_decision("timeout", timeout)["approved"] is False  # type: ignore[index]
    assert approval_decision("pending", None) is None


def test_elicitation_schema_maps_fields_or_gives_up() -> None:
    args = AskHumanToolArgs.model_validate({
        "question": "q", "actions": [{"id": "ok", "label": "OK"}],
        "fields": [{"type": "number", "name": "n", "label": "N", "min_value": 1,
                    "max_value": 5, "required": True},
                   {"type": "checkbox", "name": "c", "label": "C", "default": True},
                   {"type": "multi-select", "name": "m", "label": "M",
                    "options": [{"value": "a", "label": "A"}]},
                   {"type": "date", "name": "d", "label": "D"}]})
    schema = elicitation_schema(args)
    assert schema is not None and schema["required"] == ["action", "n"]
    assert schema["properties"]["n"] == {"title": "N", "type": "number", "minimum": 1,
                                         "maximum": 5}
    assert schema["properties"]["c"]["default"] is True
    assert schema["properties"]["d"]["format"] == "date"
    with_file = AskHumanToolArgs.model_validate({
        "question": "q", "fields": [{"type": "file", "name": "f", "label": "F"}]})
    assert elicitation_schema(with_file) is None


async def test_waiters_wake_from_another_thread_and_clean_up() -> None:
    waiters = Waiters()
    first, second = waiters.register("r1"), waiters.register("r1")
    other = waiters.register("r2")
    thread = threading.Thread(target=waiters.wake, args=(["r1"],))
    thread.start()
    await asyncio.wait_for(asyncio.gather(first, second), 2)
    thread.join()
    assert not other.done() and waiters.count() == 1
    waiters.discard("r2", other)
    assert waiters.count() == 0
    waiters.wake(["unknown"])  # nobody waits: nothing happens


def test_default_webhook_retries_span_more_than_a_day(tmp_path: Any) -> None:
    import datetime as dt

    from bot.engine.core import Engine
    from bot.engine.outbox import OutboxClaim
    from bot.settings import load_settings
    from storage import Database

    database = Database(f"sqlite:///{tmp_path / 'w.db'}")
    engine = Engine(database, load_settings())
    limit = engine.outbox.attempt_limit(OutboxClaim(1, "webhook", "t", 1, None, None, None))
    waits = [engine.outbox.delay(OutboxClaim(1, "webhook", "t", n, None, None, None))
             for n in range(1, limit)]
    assert sum(waits, dt.timedelta()) >= dt.timedelta(hours=24)
    assert max(waits) <= dt.timedelta(hours=4)
    other = engine.outbox.attempt_limit(OutboxClaim(1, "update_card", "t", 1, None, None, None))
    assert other == engine.tuning.outbox_max_attempts  # platform calls keep their own policy
    database.dispose()
