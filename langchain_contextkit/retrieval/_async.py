"""The one sync-over-async bridge: run a coroutine to completion from sync code.

Sync entry points (a sync `StateGraph` node, `reduce_agent_sync`, a sync source over an
async function) may be called from plain threads, where `asyncio.run` does the job, or
from a thread whose event loop is busy running their caller (a sync `invoke` made from
async code), where a fresh loop in a worker thread does, with the caller's context
(callbacks, tracing) carried along.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable

__all__ = ["run_sync"]

_T = TypeVar("_T")


def run_sync(awaitable: Awaitable[_T]) -> _T:
    """Run `awaitable` from sync code, whether or not an event loop is running here."""

    async def wait() -> _T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(copy_context().run, asyncio.run, wait()).result()
