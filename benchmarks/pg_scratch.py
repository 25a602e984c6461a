"""A throwaway PostgreSQL database per benchmark round (created and dropped here)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


def scratch_database(base: str) -> tuple[str, str]:
    """Create an empty database on ``base``'s server: ``(its URL, its name)``."""
    name = f"askhuman_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(base).set(database=name).render_as_string(hide_password=False), name


def drop_database(base: str, name: str) -> None:
    """Drop a ``scratch_database`` again, even if a connection is still open."""
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@contextmanager
def scratch(base: str) -> Iterator[str]:
    """A ``scratch_database`` for the ``with`` block (its URL), dropped afterwards."""
    url, name = scratch_database(base)
    try:
        yield url
    finally:
        drop_database(base, name)
