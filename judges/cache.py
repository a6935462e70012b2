"""SQLite verdict cache, safe for several processes (WAL mode).

One row per successful verdict, keyed by a SHA-256 of the judge name and version, the judge model,
the endpoint, the full request messages and the sampling parameters.  Failures are never stored.
Each verdict is committed as soon as it is known, so a killed run loses at most the calls in flight.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ENV_CACHE = "LMMS_EVAL_PLUGINS_JUDGE_CACHE"
DEFAULT_CACHE = Path("~/.cache/lmms_eval_plugins/judge_cache.sqlite3")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    judge_version TEXT NOT NULL,
    model TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    score REAL NOT NULL,
    detail TEXT NOT NULL,
    reply TEXT NOT NULL,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
)
"""


def default_cache_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    value = env.get(ENV_CACHE)
    return Path(value).expanduser() if value else DEFAULT_CACHE.expanduser()


def sanitise_endpoint(url: str | None) -> str:
    """The endpoint as stored and reported: scheme, host, port and path, never credentials or query."""
    if not url:
        return ""
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def verdict_key(
    *,
    judge: str,
    version: str,
    model: str,
    endpoint: str,
    messages: Sequence[Mapping[str, Any]],
    sampling: Mapping[str, Any],
) -> str:
    payload = {
        "judge": judge,
        "version": version,
        "model": model,
        "endpoint": sanitise_endpoint(endpoint),
        "messages": list(messages),
        "sampling": dict(sampling),
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class VerdictCache:
    """Process-safe verdict store.  Open one per process (it reopens itself after a fork)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None

    # -- connection ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=60000")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # e.g. a file system without shared memory support
            raise OSError(f"could not put the judge cache {self.path} in WAL mode (got {mode!r})")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(_SCHEMA)
        self._conn, self._pid = conn, os.getpid()
        return conn

    def check_writable(self) -> None:
        """Open (creating if needed) and write-test the cache; raises OSError with the path."""
        try:
            with self._lock:
                conn = self._connect()
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
        except (OSError, sqlite3.Error) as exc:
            raise OSError(f"the judge cache {self.path} cannot be opened for writing: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    # -- reads --------------------------------------------------------------------------------
    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            conn = self._connect()
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT key, score, detail, reply, tokens_in, tokens_out FROM verdicts WHERE key IN ({marks})", chunk
                ).fetchall()
                for key, score, detail, reply, tin, tout in rows:
                    found[key] = {"score": score, "detail": json.loads(detail), "reply": reply, "tokens_in": tin, "tokens_out": tout}
        return found

    def get(self, key: str) -> dict[str, Any] | None:
        return self.get_many([key]).get(key)

    def count(self) -> int:
        with self._lock:
            return int(self._connect().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def rows(self) -> list[dict[str, Any]]:
        """All rows (for inspection and tests)."""
        with self._lock:
            cur = self._connect().execute("SELECT * FROM verdicts")
            names = [c[0] for c in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]

    # -- writes -------------------------------------------------------------------------------
    def put(
        self,
        key: str,
        *,
        judge: str,
        version: str,
        model: str,
        endpoint: str,
        score: float,
        detail: Mapping[str, Any],
        reply: str,
        tokens_in: int = 0,
        tokens_out: int = 0,
    ) -> None:
        row = (
            key,
            judge,
            version,
            model,
            sanitise_endpoint(endpoint),
            float(score),
            json.dumps(dict(detail), sort_keys=True, ensure_ascii=False),
            reply,
            int(tokens_in),
            int(tokens_out),
            time.time(),
        )
        with self._lock:
            # autocommit mode: each statement is its own transaction, durable once it returns
            self._connect().execute("INSERT OR REPLACE INTO verdicts VALUES (?,?,?,?,?,?,?,?,?,?,?)", row)
