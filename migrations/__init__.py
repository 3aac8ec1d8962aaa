"""Alembic migrations of memory.db (installed with the package so `serve` can run them)."""
