"""Fixtures shared by several test modules."""

from __future__ import annotations

import pytest
from _postgres import postgres_cluster, skip_reason


@pytest.fixture(scope="module")
def postgres_url():
    """A throwaway PostgreSQL cluster for the module (see `_postgres`); skips without one."""
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    with postgres_cluster() as url:
        yield url
