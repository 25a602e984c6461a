"""Shared fixtures: database URLs for SQLite and (when available) PostgreSQL.

``db_url`` is parametrized over ``sqlite`` (a fresh file per test) and ``postgres``
(a fresh database per test, created through ``ASKHUMAN_TEST_POSTGRES_URL``). The
postgres parameter is skipped when that variable is unset, unless
``ASKHUMAN_REQUIRE_POSTGRES=1`` (CI), in which case it fails. Set it up with
``eval "$(scripts/ci-postgres.sh)"``.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, create_engine, event, make_url, text
from sqlalchemy.exc import DBAPIError

from tests import leaks

POSTGRES_ENV = "ASKHUMAN_TEST_POSTGRES_URL"
REQUIRE_ENV = "ASKHUMAN_REQUIRE_POSTGRES"

leaks.install()

_used_engines: set[Engine] = set()
"""SQLAlchemy engines that connected during the running test (``close_databases``),
held until then: an engine dropped mid-test would otherwise leak its pooled
connections to the garbage collector."""


@event.listens_for(Engine, "engine_connect")
def _note_engine(connection: Connection) -> None:
    _used_engines.add(connection.engine)


def dispose_used_engines() -> None:
    """Close the pooled connections of every engine the test used: tests build
    ``Database`` objects freely (engines, replicas, CLI commands) and leave them to the
    garbage collector, where psycopg would report each connection as leaked."""
    for engine in list(_used_engines):
        engine.dispose()
    _used_engines.clear()


@pytest.fixture(autouse=True)
def close_databases() -> Iterator[None]:
    """After each test, close the database connections it left in pools."""
    yield
    dispose_used_engines()


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Put the root logger's handlers and level back after each test: a CLI command run
    through typer's CliRunner installs a handler on that run's stderr, which is closed
    once the run ends, so a later test's logs would print "--- Logging error ---"
    into whatever output it reads."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(autouse=True)
def no_unclosed_aiohttp() -> Iterator[None]:
    """Fail the test during which an event loop reported an unclosed aiohttp session,
    connector or connection (``tests/leaks.py``; ResourceWarnings fail by config)."""
    mark = leaks.count()
    yield
    found = leaks.since(mark)
    if found:
        pytest.fail("unclosed aiohttp objects reported by the event loop:\n" + "\n".join(found))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A leak found only by the last garbage collection still fails the run."""
    import gc

    mark = leaks.count()
    gc.collect()
    found = leaks.since(mark)
    if found:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print("\nunclosed aiohttp objects reported at exit:\n" + "\n".join(found))


def postgres_base_url() -> str | None:
    """The admin/base PostgreSQL URL, or skip/fail the test when it is missing."""
    url = os.environ.get(POSTGRES_ENV)
    if url:
        return url
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {POSTGRES_ENV} is not set")
    pytest.skip(f"set {POSTGRES_ENV} to run against PostgreSQL (scripts/ci-postgres.sh)")
    return None


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'askhuman.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A brand-new, empty PostgreSQL database for this test (dropped afterwards)."""
    base = postgres_base_url()
    assert base is not None
    name = f"askhuman_t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
        dispose_used_engines()  # our connections go first; the drop only ends strays
        _drop_database(admin, name)
    finally:
        admin.dispose()


def _drop_database(admin: Engine, name: str) -> None:
    """Drop a test database, tolerating a server process that briefly holds it.

    ``WITH (FORCE)`` cannot end backends of other roles (an autovacuum worker that
    just started on the fresh database, for example), so retry briefly and leave
    the database behind rather than failing a test that passed.
    """
    for attempt in range(10):
        try:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            return
        except DBAPIError:
            time.sleep(0.2 * (attempt + 1))
    warnings.warn(f"could not drop test database {name}; it was left behind", stacklevel=1)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test runs once per database backend, always on a fresh, empty database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'askhuman.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url
