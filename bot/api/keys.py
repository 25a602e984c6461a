"""API keys and webhook signing secrets.

Keys (``ahk_…``, 256 random bits) are shown once and stored only as a SHA-256 hash:
for a random key that is as good as a slow hash, and lookups stay one indexed read.
Webhook secrets (Standard Webhooks ``whsec_…``) must be readable to sign, so they are
stored encrypted with AES-256-GCM under a key derived from ``ASKHUMAN_SECRET_KEY``
(environment only, never in the database or the config file); the client's name is
bound in as associated data, so a ciphertext copied to another client does not open.
``cryptography`` (about 7 MB once loaded) is imported by the first ``SecretBox``: a
server without webhooks (no ``ASKHUMAN_SECRET_KEY``) never holds it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from collections.abc import Mapping

KEY_PREFIX = "ahk_"
SECRET_ENV = "ASKHUMAN_SECRET_KEY"
MIN_SECRET_KEY_CHARS = 16
_VERSION = "v1:"


class SecretKeyError(RuntimeError):
    """``ASKHUMAN_SECRET_KEY`` is missing, too short, or not the one used to encrypt."""


def new_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_prefix(key: str) -> str:
    return key[: len(KEY_PREFIX) + 6]


def new_webhook_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class SecretBox:
    """Encrypt/decrypt webhook secrets with the server's secret key."""

    def __init__(self, master: str) -> None:
        if len(master) < MIN_SECRET_KEY_CHARS:
            raise SecretKeyError(
                f"{SECRET_ENV} must be at least {MIN_SECRET_KEY_CHARS} characters; make one "
                "with: python -c \"import secrets; print(secrets.token_urlsafe(32))\"")
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(hashlib.sha256(b"askhuman webhook secrets|" + master.encode()).digest())

    def seal(self, secret: str, client_name: str) -> str:
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, secret.encode(), client_name.encode())
        return _VERSION + base64.b64encode(nonce + sealed).decode()

    def open(self, sealed: str, client_name: str) -> str:
        if not sealed.startswith(_VERSION):
            raise SecretKeyError("unknown secret format")
        from cryptography.exceptions import InvalidTag

        raw = base64.b64decode(sealed[len(_VERSION):])
        try:
            return self._aead.decrypt(raw[:12], raw[12:], client_name.encode()).decode()
        except InvalidTag:
            raise SecretKeyError(
                f"cannot decrypt the webhook secret of '{client_name}': {SECRET_ENV} is not "
                "the key it was created with (restore it, or run "
                f"'askhuman api-key rotate-secret {client_name}')") from None


def box_from_env(env: Mapping[str, str] | None = None) -> SecretBox:
    """The box for ``$ASKHUMAN_SECRET_KEY``; ``SecretKeyError`` names the fix."""
    value = (os.environ if env is None else env).get(SECRET_ENV, "").strip()
    if not value:
        raise SecretKeyError(
            f"{SECRET_ENV} is not set; it encrypts the webhook signing secrets. Make one with "
            "python -c \"import secrets; print(secrets.token_urlsafe(32))\" and keep it with "
            "your other secrets (every replica needs the same value)")
    return SecretBox(value)
