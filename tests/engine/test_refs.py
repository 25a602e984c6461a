"""Request references are safe to type on a command line."""

from __future__ import annotations

import pytest

from bot.engine import store


def test_a_ref_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """``askhuman requests show -M3x…`` read the ref as an option and failed (a CI run
    met one: 1 ref in 64 starts with ``-``)."""
    monkeypatch.setattr(store.secrets, "token_urlsafe", lambda n: "-M3xQ9_aZk2Lp0w-")
    assert store.new_ref() == "RM3xQ9_aZk2Lp0w-"


def test_refs_are_random_and_url_safe() -> None:
    refs = {store.new_ref() for _ in range(2000)}
    assert len(refs) == 2000
    assert all(len(r) == 16 and not r.startswith("-") for r in refs)
    assert all(c.isalnum() or c in "-_" for r in refs for c in r)
