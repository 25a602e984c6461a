"""What a ``/feishu/events`` body must be before lark-oapi sees it.

lark-oapi's dispatcher answers anything it cannot use with a 500 and logs an error
with a traceback, so an unsigned POST, a wrong verification token or a body that is
not JSON would let anyone fill the logs. ``open_body`` decrypts and parses the body
the way the SDK will (``{"encrypt": ...}`` with AES-256-CBC, or plain JSON) and
raises ``BadBody`` for junk; ``token_matches`` checks the verification token the
SDK would check. The endpoint refuses with one log line on either.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from lark_oapi.core.utils import AESCipher

URL_VERIFICATION = "url_verification"


class BadBody(ValueError):
    """The body is not a Feishu callback: a short, body-free reason for the reply."""


def _json_object(text: str | bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise BadBody(f"{what} is not valid JSON") from None
    if not isinstance(value, dict):
        raise BadBody(f"{what} is not a JSON object")
    return value


def open_body(body: bytes, encrypt_key: str) -> dict[str, Any]:
    """The callback as a dict: decrypted if it is ``{"encrypt": ...}``, else as sent.

    Also checks the shape the SDK relies on: a 2.0 event (``schema``) has a
    ``header`` object, or the SDK fails on it with a traceback.
    """
    return open_body_text(body, encrypt_key)[0]


def open_body_text(body: bytes, encrypt_key: str) -> tuple[dict[str, Any], bytes]:
    """``open_body`` and the plaintext JSON it parsed, for the SDK's dispatch without a
    second decryption (``EventDispatcherHandler._do_without_validation``)."""
    outer = _json_object(body, "body")
    encrypted = outer.get("encrypt")
    plaintext: str | bytes = body
    if encrypted is None:
        payload = outer
    elif not isinstance(encrypted, str) or not encrypted or not encrypt_key:
        raise BadBody("encrypted body cannot be decrypted")
    else:
        try:
            plaintext = AESCipher(encrypt_key).decrypt_str(encrypted)
        except Exception:  # bad base64, padding or key: all the same to the sender
            raise BadBody("encrypted body cannot be decrypted") from None
        payload = _json_object(plaintext, "decrypted body")
    if payload.get("schema") and not isinstance(payload.get("header"), dict):
        raise BadBody("2.0 event without a header object")
    return payload, plaintext.encode() if isinstance(plaintext, str) else plaintext


def claimed_token(payload: dict[str, Any]) -> Any:
    """The verification token the callback carries, where the SDK looks for it."""
    if payload.get("schema"):
        return payload["header"].get("token")
    return payload.get("token")


def token_matches(payload: dict[str, Any], verification_token: str) -> bool:
    """Whether the callback's token is ours (constant time).

    Like the SDK: ``url_verification`` must carry the token; another callback may
    omit it (the signature vouches for it then), but one it carries must match.
    """
    token = claimed_token(payload)
    if token is None and payload.get("type") != URL_VERIFICATION:
        return True
    return (
        isinstance(token, str)
        and bool(verification_token)
        and hmac.compare_digest(token.encode(), verification_token.encode())
    )


def event_id(payload: dict[str, Any]) -> str | None:
    """A 2.0 event's ``header.event_id``, if it has one."""
    header = payload.get("header")
    value = header.get("event_id") if isinstance(header, dict) else None
    return value if isinstance(value, str) and value else None
