"""A throwaway PostgreSQL cluster for tests: initdb + pg_ctl on 127.0.0.1, then removed.

initdb refuses to run as root, so as root the cluster's folder is handed to `nobody` and
the server runs as that user. `postgres_cluster` yields a connection URL (trust auth, no
password); `create_database` adds a database to it and returns that one's URL. Set PG_BIN
to another installation's bin folder to use it instead of the system's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

LOCALHOST = pytest.mark.allow_hosts(["127.0.0.1"])
"""The mark a test needs to open sockets to the cluster (and other loopback servers)."""

_NOBODY = 65534


def pg_bin() -> Path | None:
    """The folder holding initdb and pg_ctl (PG_BIN, Debian's newest, PATH), or None."""
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda folder: int(folder.parent.name) if folder.parent.name.isdigit() else 0,
        reverse=True,
    )
    for candidate in [os.environ.get("PG_BIN", ""), *map(str, debian)]:
        if candidate and (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def skip_reason() -> str | None:
    """Why a PostgreSQL test cannot run here, or None when it can."""
    if pg_bin() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl); set PG_BIN to their folder"
    try:
        import langgraph.checkpoint.postgres
        import langgraph.store.postgres  # noqa: F401
    except ImportError:
        return "langgraph-checkpoint-postgres is not installed"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def postgres_cluster() -> Iterator[str]:
    """Start a cluster, yield its URL, stop it (immediately) and delete its files."""
    bindir = pg_bin()
    if bindir is None:
        msg = "no PostgreSQL server binaries"
        raise RuntimeError(msg)
    root = Path(tempfile.mkdtemp(prefix="contextkit-pg-"))
    as_user: dict[str, int] = {}
    if os.geteuid() == 0:
        os.chown(root, _NOBODY, _NOBODY)
        as_user = {"user": _NOBODY, "group": _NOBODY}
    data = root / "data"
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run(  # noqa: S603 - the server's own binaries, fixed arguments
        [bindir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
        env=env,
        cwd=root,
        **as_user,
    )
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    subprocess.run(  # noqa: S603 - the server's own binaries, fixed arguments
        [bindir / "pg_ctl", "-D", data, "-o", options, "-l", root / "log", "-w", "start"],
        check=True,
        capture_output=True,
        env=env,
        cwd=root,
        **as_user,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(  # noqa: S603 - the server's own binaries, fixed arguments
            [bindir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
            check=False,
            capture_output=True,
            cwd=root,
            **as_user,
        )
        shutil.rmtree(root, ignore_errors=True)


def create_database(url: str, name: str) -> str:
    """Create database `name` on the cluster at `url` and return its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # a name of the test's own
    return url.rsplit("/", 1)[0] + f"/{name}"
