"""Alembic migrations for :mod:`storage` (run through :func:`storage.upgrade`)."""
