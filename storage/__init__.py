"""Persistence for askhuman: SQLAlchemy 2 models, engine helpers and Alembic migrations.

This package knows nothing about bots or platforms (it imports only SQLAlchemy,
Alembic and the standard library), so the engine can own the business rules while
storage owns the tables and the transaction mechanics:

- :mod:`storage.models` — the tables (runs, human requests, deliveries, responses,
  staged files, resume jobs, the side-effect outbox, audit log, click inbox; API
  clients, external requests and run triggers; run starts stored before their ack;
  standing grants in :mod:`storage.grants`).
- :mod:`storage.db` — :class:`Database` (sync engine + session factory, SQLite
  ``BEGIN IMMEDIATE`` and pragmas) and :func:`upgrade` (Alembic to ``head``).

SQLite (one file) is the default; a ``postgresql+psycopg://`` URL runs the same code.
"""

from storage.db import Database, upgrade
from storage.grants import Grant
from storage.inboxes import ClickInbox, RunStart
from storage.models import (
    ApiClient,
    AuditChainGap,
    AuditChainHead,
    AuditLog,
    Base,
    Delegation,
    Delivery,
    ExternalRequest,
    HumanRequest,
    Instance,
    OutboxItem,
    RateLimit,
    ResumeJob,
    Run,
    RunTrigger,
    SeenEvent,
    StagedFile,
    Vote,
)

__all__ = [
    "ApiClient",
    "AuditChainGap",
    "AuditChainHead",
    "AuditLog",
    "Base",
    "ClickInbox",
    "Database",
    "Delegation",
    "Delivery",
    "ExternalRequest",
    "Grant",
    "HumanRequest",
    "Instance",
    "OutboxItem",
    "RateLimit",
    "ResumeJob",
    "Run",
    "RunStart",
    "RunTrigger",
    "SeenEvent",
    "StagedFile",
    "Vote",
    "upgrade",
]
