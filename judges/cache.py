"""SQLite verdict cache, safe for several processes (WAL mode).

One row per successful verdict, keyed by a SHA-256 of the judge name and version, the judge model,
the endpoint, the full request messages and the sampling parameters.  Failures are never stored.
Each verdict is committed as soon as it is known, so a killed run loses at most the calls in flight.

The cache is not trusted.  Every row read is validated (:func:`validate_row`: columns present and
typed, score a finite number in [0, 1], detail a JSON object; then :func:`cached_verdict_problem`:
the judge, prompt version, model and endpoint of the request, the score in the judge's range and
equal to what the judge's parser reads from the stored reply); a bad row is left out with a warning,
so the sample is judged again and the new verdict replaces the row.  A file that is not a SQLite
database, or is damaged (found when it is opened or later in the run), is moved aside and a new
cache is created; if it cannot be moved, the cache is bypassed for the rest of the process.  Never
fatal.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import contextlib
import json
import math
import os
import secrets
import sqlite3
import stat
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from loguru import logger

from lmms_eval_plugins.safe_files import (
    UnsafePathError,
    make_private,
    move_into_place,
    read_stored,
    write_atomic,
    write_new,
)

from .base import Judge, JudgeItem, ReplyParseError

ENV_CACHE = "LMMS_EVAL_PLUGINS_JUDGE_CACHE"
ENV_CACHE_SECRET = "LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET"
DEFAULT_CACHE = Path("~/.cache/lmms_eval_plugins/judge_cache.sqlite3")
SECRET_FILE = "judge_cache.secret"  # under settings.cache_root(), never next to a cache that gets copied

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
    created REAL NOT NULL,
    mac TEXT NOT NULL DEFAULT ''
)
"""
_COLUMNS = ("key", "judge", "judge_version", "model", "endpoint", "score", "detail", "reply", "tokens_in", "tokens_out")


class CorruptCacheError(sqlite3.DatabaseError):
    """The cache file is not a verdict cache we can read (not SQLite, damaged, or missing columns)."""


def _is_corrupt(exc: BaseException) -> bool:
    """Damage to the file itself (not a locked or unwritable database)."""
    if isinstance(exc, CorruptCacheError):
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text


class BadCacheRow(ValueError):
    """A cached verdict row that fails validation (it is ignored and the sample judged again)."""


class CacheSecretError(OSError):
    """The per-user secret that signs cache rows cannot be read or created (the run judges without the cache)."""


# ---- row signatures ----------------------------------------------------------------------------
# Each row carries an HMAC-SHA256 over its content under a per-user secret kept outside the cache
# (settings.cache_root()/judge_cache.secret, mode 0600): a row edited by hand, or copied from a cache
# signed with another secret, fails the check and is asked again.  `judge-cache merge` re-signs rows
# from another machine's cache after checking them with that machine's secret.


def secret_path(env: Mapping[str, str] | None = None) -> Path:
    """``LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET``, else ``judge_cache.secret`` under the plugin's cache root."""
    from lmms_eval_plugins.settings import cache_root

    env = os.environ if env is None else env
    value = env.get(ENV_CACHE_SECRET)
    return Path(value).expanduser() if value else cache_root() / SECRET_FILE


_SECRET_MAX_BYTES = 4096  # a secret file is 65 bytes of hex; anything much bigger is not one


def _check_secret_file(path: Path) -> tuple[bytes, os.stat_result]:
    """The secret in ``path`` and its stat, checked before anything is changed: a regular file (not a
    link, folder or FIFO) owned by this user, holding at least 16 bytes as hex.  Else CacheSecretError."""
    try:  # read-only, never through a link, never blocking on a FIFO
        data, st = read_stored(path, _SECRET_MAX_BYTES)
    except UnsafePathError as exc:
        if "symbolic link" in str(exc):
            raise CacheSecretError(
                f"the judge cache secret {path} is a symbolic link; give the secret file itself (a regular file of "
                f"yours, mode 0600) with --secret or {ENV_CACHE_SECRET}"
            ) from None
        raise CacheSecretError(
            f"the judge cache secret {path} is not a regular file (a folder or a device); nothing was changed. "
            f"Give the secret file itself with --secret or {ENV_CACHE_SECRET}"
        ) from None
    except ValueError:
        raise CacheSecretError(
            f"the judge cache secret {path} does not hold a secret (it holds more than {_SECRET_MAX_BYTES} bytes); if it "
            "is this machine's secret, delete it to make a new one (the cached verdicts are then asked again)"
        ) from None
    except OSError as exc:
        raise CacheSecretError(
            f"the judge cache secret {path} is unreadable ({exc.strerror or exc}); give the secret file itself (a "
            f"regular file of yours, mode 0600) with --secret or {ENV_CACHE_SECRET}"
        ) from None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise CacheSecretError(
            f"the judge cache secret {path} belongs to another user (uid {st.st_uid}), who could forge cache rows; "
            "copy it to a file of your own, mode 0600"
        )
    try:
        secret = bytes.fromhex(data.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError) as exc:
        raise CacheSecretError(
            f"the judge cache secret {path} does not hold a secret ({exc}); if it is this machine's secret, delete it "
            "to make a new one (the cached verdicts are then asked again)"
        ) from None
    if len(secret) < 16:
        raise CacheSecretError(
            f"the judge cache secret {path} holds {len(secret)} bytes, fewer than 16; delete it to make a new one"
        )
    return secret, st


def _read_secret(path: Path, *, own: bool = True) -> bytes:
    """The secret in ``path``, checked first (see :func:`_check_secret_file`).

    One readable by other users may have been read, and rows signed under it forged: this user's own
    secret (``own``) is replaced by a new one (so the rows signed under the old one are asked again);
    another machine's secret (``judge-cache merge --secret``) is refused, changing nothing."""
    secret, st = _check_secret_file(path)
    if not stat.S_IMODE(st.st_mode) & 0o077:
        return secret
    if not own:
        raise CacheSecretError(
            f"the judge cache secret {path} is readable by other users (mode {stat.S_IMODE(st.st_mode):04o}), who could "
            f"have signed rows with it; nothing was merged. If nobody else could read it, `chmod 600 {path}` and merge again"
        )
    try:
        write_atomic(path, secrets.token_hex(32) + "\n", mode=0o600, encoding="ascii")
    except OSError as exc:
        raise CacheSecretError(
            f"the judge cache secret {path} is readable by other users and could not be replaced ({exc})"
        ) from None
    logger.warning(
        f"judge cache secret {path} was readable by other users (mode {stat.S_IMODE(st.st_mode):04o}), so anyone could "
        "have forged cache rows with it: made a new secret (mode 0600); the verdicts signed under the old one are asked again"
    )
    return _check_secret_file(path)[0]


def load_secret(path: Path | None = None, *, create: bool = True) -> bytes:
    """The secret in ``path`` (default :func:`secret_path`), created (32 random bytes, hex, mode 0600)
    when missing and ``create``.  Creation is atomic: concurrent processes end up with one secret.
    ``create=False`` reads another machine's secret (``judge-cache merge --secret``): never changed."""
    path = secret_path() if path is None else Path(path)
    if os.path.lexists(path) or not create:
        return _read_secret(path, own=create)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_new(path, secrets.token_hex(32) + "\n", mode=0o600, encoding="ascii")  # False: another process won
    except OSError as exc:
        raise CacheSecretError(f"could not create the judge cache secret {path} ({exc})") from None
    return _read_secret(path)


def row_mac(secret: bytes, raw: Mapping[str, Any]) -> str:
    """HMAC-SHA256 (hex) of a row's stored columns (``_COLUMNS``, as stored: detail as its JSON text)."""
    values = [raw[name] for name in _COLUMNS]
    blob = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
    return hmac.new(secret, blob.encode("utf-8"), hashlib.sha256).hexdigest()


def mac_problem(secret: bytes, raw: Mapping[str, Any]) -> str | None:
    """Why the row's signature does not hold (None when it does)."""
    mac = raw.get("mac")
    if not isinstance(mac, str) or not mac:
        return "it is not signed (written by an older version, or by hand)"
    try:
        expected = row_mac(secret, raw)
    except (TypeError, ValueError):
        return "its columns cannot be signed"
    if not hmac.compare_digest(mac, expected):
        return (
            "its HMAC does not match its content (edited by hand, or copied from a cache signed with another "
            "secret: use `lmms-eval-plugins judge-cache merge`)"
        )
    return None


def validate_row(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The typed contents of one cache row, or :class:`BadCacheRow` saying what is wrong.

    Checks what holds for every judge: text columns are non-empty text, ``score`` a finite number in
    [0, 1], ``detail`` a JSON object, ``reply`` text, token counts non-negative integers."""
    for name in _COLUMNS:
        if name not in raw:
            raise BadCacheRow(f"column {name!r} is missing")
    for name in ("judge", "judge_version", "model"):
        if not isinstance(raw[name], str) or not raw[name]:
            raise BadCacheRow(f"{name} is {raw[name]!r}, not text")
    if not isinstance(raw["endpoint"], str):
        raise BadCacheRow(f"endpoint is {raw['endpoint']!r}, not text")
    score = raw["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise BadCacheRow(f"score is {score!r}, not a number")
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise BadCacheRow(f"score {score!r} is outside [0, 1]")
    if not isinstance(raw["detail"], str):
        raise BadCacheRow(f"detail is {type(raw['detail']).__name__}, not JSON text")
    try:
        detail = json.loads(raw["detail"])
    except (ValueError, RecursionError) as exc:
        raise BadCacheRow(f"detail is not JSON ({exc})") from None
    if not isinstance(detail, dict):
        raise BadCacheRow(f"detail is a JSON {type(detail).__name__}, not an object")
    if not isinstance(raw["reply"], str):
        raise BadCacheRow(f"reply is {type(raw['reply']).__name__}, not text")
    for name in ("tokens_in", "tokens_out"):
        if isinstance(raw[name], bool) or not isinstance(raw[name], int) or raw[name] < 0:
            raise BadCacheRow(f"{name} is {raw[name]!r}, not a count")
    return {
        "judge": raw["judge"],
        "version": raw["judge_version"],
        "model": raw["model"],
        "endpoint": raw["endpoint"],
        "score": float(score),
        "detail": detail,
        "reply": raw["reply"],
        "tokens_in": raw["tokens_in"],
        "tokens_out": raw["tokens_out"],
    }


def cached_verdict_problem(
    judge: Judge, item: JudgeItem, row: Mapping[str, Any], *, model: str, endpoint: str
) -> str | None:
    """Why the validated row ``row`` (from :meth:`VerdictCache.get_many`) cannot stand as ``judge``'s
    verdict on ``item`` for this request, or None when it can.

    The row must come from the same judge, prompt version, model and endpoint; its score must be in
    the judge's range (a binary judge: exactly 0 or 1; any judge: [0, 1]); and for an LLM judge the
    stored reply must still parse, with the judge's current parser, to the same score (and the same
    per-point lists for a rubric judge), so a verdict read by an older, more lenient parser is
    re-judged rather than trusted."""
    expected = (
        ("judge", judge.name),
        ("version", judge.version),
        ("model", model),
        ("endpoint", sanitise_endpoint(endpoint)),
    )
    for field, want in expected:
        if row.get(field) != want:
            return f"{field} is {row.get(field)!r}, not {want!r}"
    score = row["score"]
    if judge.kind == "binary" and score not in (0.0, 1.0):
        return f"score {score!r} is not 0 or 1"
    parse = getattr(judge, "parse_reply", None)
    if parse is None:
        return None
    try:
        verdict = parse(row["reply"], item)
    except ReplyParseError as exc:
        return f"its stored reply does not parse ({exc})"
    except Exception as exc:  # noqa: BLE001 - a judge's parser bug: do not trust the row
        return f"re-reading its stored reply failed ({exc!r})"
    if not math.isclose(float(verdict.score), score, rel_tol=0.0, abs_tol=1e-9):
        return f"score {score!r} is not what its stored reply says ({verdict.score!r})"
    for field in ("coverage", "correctness"):
        if field in verdict.detail and row["detail"].get(field) != verdict.detail[field]:
            return f"detail {field} {row['detail'].get(field)!r} is not what its stored reply says"
    return None


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

    def __init__(self, path: str | os.PathLike[str], *, secret: bytes | None = None) -> None:
        self.path = Path(path).expanduser()
        self._secret = secret  # read (or created) on first use when not given
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self.bypassed: str | None = None  # why this process judges without the cache (None: it uses it)
        self._opened: os.stat_result | None = None  # the file the connection has open

    # -- connection ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            opened = os.stat(self.path)
        except OSError:
            opened = None
        try:
            conn = self._open()
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc):
                raise
            self._set_aside(exc, opened)  # raises CorruptCacheError if it cannot
            opened = None
            conn = self._open()
        if opened is None:
            opened = os.stat(self.path)
        self._conn, self._pid, self._opened = conn, os.getpid(), opened
        return conn

    def _open(self) -> sqlite3.Connection:
        # verdicts are private: the database (made here before SQLite creates it, so never through a link)
        # and its -wal/-shm, which SQLite creates with the database's mode, are 0600
        make_private(self.path)
        for suffix in ("-wal", "-shm"):
            make_private(f"{self.path}{suffix}", create=False)
        conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout=60000")
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":  # e.g. a file system without shared memory support
                raise OSError(f"could not put the judge cache {self.path} in WAL mode (got {mode!r})")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
            present = {row[1] for row in conn.execute("PRAGMA table_info(verdicts)")}
            if "mac" not in present:  # a cache from before signatures: its rows are unsigned, so asked again
                conn.execute("ALTER TABLE verdicts ADD COLUMN mac TEXT NOT NULL DEFAULT ''")
            missing = [c for c in _COLUMNS if c not in present]
            if missing:
                raise CorruptCacheError(f"its verdicts table lacks the column(s) {', '.join(missing)}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _set_aside(self, exc: BaseException, opened: os.stat_result | None) -> None:
        """Move the damaged cache file ``opened`` (and its -wal/-shm) aside so that a new one can be
        created; leave it alone if another process has replaced it meanwhile."""
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            current = None
        if opened is None or current is None or (current.st_dev, current.st_ino) != (opened.st_dev, opened.st_ino):
            logger.warning(f"judge cache {self.path} was damaged ({exc}); another process has replaced it")
            return
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        try:
            move_into_place(self.path, aside)
        except OSError as move_exc:
            raise CorruptCacheError(
                f"the judge cache {self.path} is damaged ({exc}) and could not be moved aside ({move_exc})"
            ) from exc
        for suffix in ("-wal", "-shm"):
            try:
                move_into_place(f"{self.path}{suffix}", f"{aside}{suffix}")
            except OSError:
                pass
        logger.warning(
            f"judge cache {self.path} is damaged ({exc}); moved it to {aside} and started a new cache "
            "(the verdicts it held will be asked again)"
        )

    def _recover(self, exc: BaseException) -> bool:
        """Damage found while reading or writing: move the file aside and start a new cache (True), or,
        if that fails, judge without a cache for the rest of the process (False).  One warning."""
        opened = self._opened
        if self._conn is not None and self._pid == os.getpid():
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = self._opened = None
        try:
            self._set_aside(exc, opened)
            self._connect()
            return True
        except (OSError, sqlite3.Error) as again:
            self._bypass(again)
            return False

    def _bypass(self, exc: BaseException) -> None:
        """Stop using a cache that cannot be read or repaired (one warning)."""
        if self.bypassed is None:
            self.bypassed = str(exc)
            logger.warning(
                f"judge cache {self.path} is damaged ({exc}); this process judges without it from now on "
                "(move or delete the file to start a new cache)"
            )
        if self._conn is not None and self._pid == os.getpid():
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None

    def check_writable(self) -> None:
        """Open (creating if needed) and write-test the cache; raises OSError with the path.

        A damaged file is moved aside and replaced (see :meth:`_connect`); one that cannot be moved
        aside makes the process judge without the cache (a warning), not an error."""
        if self.bypassed is not None:
            return
        try:
            with self._lock:
                conn = self._connect()
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
        except (OSError, sqlite3.Error) as exc:
            if _is_corrupt(exc):
                with self._lock:
                    self._bypass(exc)
                return
            raise OSError(f"the judge cache {self.path} cannot be opened for writing: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    @property
    def secret(self) -> bytes:
        if self._secret is None:
            self._secret = load_secret()
        return self._secret

    # -- reads --------------------------------------------------------------------------------
    def get_many(self, keys: Iterable[str], *, rejected: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
        """The valid rows (see :func:`validate_row`) for ``keys``, by key.

        A row that fails validation is left out (its sample is judged again and the new verdict
        replaces it); the reason goes into ``rejected`` (key -> reason) when given, else into a
        warning.  A damaged file makes the cache bypassed: no rows, no error."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        bad: dict[str, str] = {} if rejected is None else rejected
        secret = self.secret
        with self._lock:
            if self.bypassed is not None:
                return found
            try:
                conn = self._connect()
                for start in range(0, len(keys), 500):
                    chunk = keys[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    cur = conn.execute(f"SELECT {', '.join(_COLUMNS)}, mac FROM verdicts WHERE key IN ({marks})", chunk)
                    for values in cur.fetchall():
                        raw = dict(zip((*_COLUMNS, "mac"), values))
                        try:
                            row = validate_row(raw)
                        except BadCacheRow as exc:
                            bad[raw["key"]] = str(exc)
                            continue
                        problem = mac_problem(secret, raw)
                        if problem is not None:
                            bad[raw["key"]] = problem
                        else:
                            found[raw["key"]] = row
            except sqlite3.DatabaseError as exc:
                if not _is_corrupt(exc):
                    raise
                self._recover(exc)  # a new, empty cache (or none): the rows not read yet are asked again
        if rejected is None and bad:
            logger.warning(
                f"judge cache {self.path}: ignored {len(bad)} invalid row(s), their samples are judged again "
                f"(e.g. {next(iter(bad.values()))})"
            )
        return found

    def get(self, key: str) -> dict[str, Any] | None:
        return self.get_many([key]).get(key)

    def count(self) -> int:
        with self._lock:
            if self.bypassed is not None:
                return 0
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
        """Store one verdict, durable once it returns (its own transaction)."""
        self.put_many(
            [
                dict(
                    key=key,
                    judge=judge,
                    version=version,
                    model=model,
                    endpoint=endpoint,
                    score=score,
                    detail=detail,
                    reply=reply,
                    tokens_in=tokens_in,
                    tokens_out=tokens_out,
                )
            ]
        )

    def put_many(self, verdicts: Iterable[Mapping[str, Any]]) -> None:
        """Store verdicts (each a mapping of :meth:`put`'s arguments) in one transaction: all or none, one
        commit for a whole batch's output (a batch ingest wrote one transaction per verdict: issue 40)."""
        rows = []
        for v in verdicts:
            values = (
                v["key"],
                v["judge"],
                v["version"],
                v["model"],
                sanitise_endpoint(v["endpoint"]),
                float(v["score"]),
                json.dumps(dict(v["detail"]), sort_keys=True, ensure_ascii=False),
                v["reply"],
                int(v.get("tokens_in", 0)),
                int(v.get("tokens_out", 0)),
            )
            rows.append((*values, time.time(), row_mac(self.secret, dict(zip(_COLUMNS, values)))))
        if not rows:
            return
        with self._lock:
            if self.bypassed is not None:
                return
            insert = f"INSERT OR REPLACE INTO verdicts ({', '.join(_COLUMNS)}, created, mac) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"

            def write() -> None:
                conn = self._connect()
                if len(rows) == 1:  # autocommit mode: the statement is its own transaction
                    conn.execute(insert, rows[0])
                    return
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(insert, rows)
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")

            try:
                write()
            except sqlite3.DatabaseError as exc:
                if not _is_corrupt(exc):
                    raise
                if self._recover(exc):
                    write()


# ---- merging caches from other machines --------------------------------------------------------


ENV_MAX_REPLY_BYTES = "LMMS_EVAL_PLUGINS_JUDGE_MAX_REPLY_BYTES"  # the judge runtime's reply cap (runtime.py)
_SHORT_COLUMN_BYTES = 4096  # key, judge, version, model, endpoint, mac: short names and hashes
_SQLITE_MAX_VALUE = 16 * 1024 * 1024  # SQLite refuses to make any value bigger while reading a merged file
_MERGE_BATCH = 500


def merge_column_caps(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """The most bytes each text column of a merged row may hold: ``reply`` and ``detail`` twice the
    judge reply cap (a reply over it is never cached; redaction markers can lengthen one), others 4 KiB."""
    env = os.environ if env is None else env
    try:
        reply_cap = max(1, int(env.get(ENV_MAX_REPLY_BYTES, "") or 65536))
    except ValueError:
        reply_cap = 65536
    caps = dict.fromkeys(("key", "judge", "judge_version", "model", "endpoint", "mac"), _SHORT_COLUMN_BYTES)
    caps.update(reply=2 * reply_cap, detail=2 * reply_cap)
    caps.update(dict.fromkeys(("score", "tokens_in", "tokens_out"), 64))  # numbers (a hostile file may store text)
    return caps


def _open_merge_source(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only, refused (CorruptCacheError) unless it is a plain verdict table: a view,
    trigger, virtual table or generated column computes rows or values when read, so a small file
    could make them any size."""
    from urllib.request import pathname2url

    conn = sqlite3.connect(f"file:{pathname2url(str(path))}?mode=ro", uri=True, timeout=60.0)
    try:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _SQLITE_MAX_VALUE)
        conn.execute("PRAGMA trusted_schema=OFF")
        conn.execute("PRAGMA query_only=ON")
        objects = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        odd = [
            f"{kind} {name!r}"
            for kind, name, table, sql in objects
            if not (kind == "table" and not str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL"))
            and not (kind == "index" and sql is None)
        ]  # an index SQLite made for a UNIQUE / PRIMARY KEY
        if odd:
            raise CorruptCacheError(
                f"{path} is not a plain judge cache: it holds {', '.join(odd[:5])}{' ...' if len(odd) > 5 else ''} "
                "(views, triggers, virtual tables and expression indexes compute data when read); nothing was merged"
            )
        if not any(kind == "table" and name == "verdicts" for kind, name, _, _ in objects):
            raise CorruptCacheError(f"{path} is not a judge cache (it has no verdicts table)")
        columns = conn.execute("PRAGMA table_xinfo(verdicts)").fetchall()
        generated = [str(c[1]) for c in columns if c[6] not in (0, 1)]  # hidden 2/3: a generated column
        if generated:
            raise CorruptCacheError(
                f"{path} is not a plain judge cache: its column(s) {', '.join(generated)} are computed when read; nothing was merged"
            )
        missing = [c for c in (*_COLUMNS, "mac") if c not in {str(col[1]) for col in columns}]
        if missing:
            raise CorruptCacheError(
                f"{path} is not a signed judge cache (its verdicts table lacks {', '.join(missing)})"
            )
    except BaseException:
        conn.close()
        raise
    return conn


def merge_cache(source: str | os.PathLike[str], into: VerdictCache, source_secret: bytes) -> dict[str, int]:
    """Copy the rows of the cache file ``source`` into ``into``, re-signed with ``into``'s secret.

    ``source`` is hostile until checked: it must be a plain verdict table (:func:`_open_merge_source`),
    rows are read as a stream, and a row with a column over :func:`merge_column_caps` is dropped
    (counted as ``oversized``) by SQL before it is fetched.  A row is copied only when it passes
    :func:`validate_row` and its HMAC holds under ``source_secret`` (the secret of the machine that
    wrote it); rows already in ``into`` are kept.  Returns the counts ``merged``, ``present``,
    ``bad_mac``, ``invalid`` and ``oversized``."""
    counts = {"merged": 0, "present": 0, "bad_mac": 0, "invalid": 0, "oversized": 0}
    path = Path(source).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no judge cache at {path}")
    caps = merge_column_caps()
    # octet length of the stored value (a BLOB's length is in its header; TEXT is bounded by the file)
    fits = " AND ".join(f"coalesce(length(CAST({name} AS BLOB)), 0) <= {cap}" for name, cap in caps.items())
    conn = _open_merge_source(path)
    try:
        counts["oversized"] = int(conn.execute(f"SELECT COUNT(*) FROM verdicts WHERE NOT ({fits})").fetchone()[0])
        cur = conn.execute(f"SELECT {', '.join(_COLUMNS)}, mac FROM verdicts WHERE {fits}")
        while batch := cur.fetchmany(_MERGE_BATCH):
            _merge_batch(batch, into, source_secret, counts)
    finally:
        conn.close()
    return counts


def _merge_batch(
    batch: Sequence[Sequence[Any]], into: VerdictCache, source_secret: bytes, counts: dict[str, int]
) -> None:
    existing = set(into.get_many((row[0] for row in batch), rejected={}))  # valid, signed rows of the destination
    fresh: list[dict[str, Any]] = []
    for values in batch:
        raw = dict(zip((*_COLUMNS, "mac"), values))
        try:
            row = validate_row(raw)
        except BadCacheRow:
            counts["invalid"] += 1
            continue
        if mac_problem(source_secret, raw) is not None:
            counts["bad_mac"] += 1
            continue
        if raw["key"] in existing:
            counts["present"] += 1
            continue
        fresh.append(
            dict(
                key=raw["key"],
                judge=row["judge"],
                version=row["version"],
                model=row["model"],
                endpoint=row["endpoint"],
                score=row["score"],
                detail=row["detail"],
                reply=row["reply"],
                tokens_in=row["tokens_in"],
                tokens_out=row["tokens_out"],
            )
        )
        existing.add(raw["key"])
        counts["merged"] += 1
    into.put_many(fresh)  # one transaction per block of rows


def cli_main(argv: Sequence[str] | None = None) -> int:
    """``lmms-eval-plugins judge-cache merge SRC [--into CACHE] [--secret FILE]``."""
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins judge-cache",
        description="Manage the judge verdict cache. Rows are signed with a per-user secret; "
        "`merge` copies rows from another machine's cache after checking their signatures.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    merge = sub.add_parser("merge", help="copy verified rows of another cache into this one")
    merge.add_argument("source", help="the other cache file (judge_cache.sqlite3 copied from the other machine)")
    merge.add_argument(
        "--into", default=None, help=f"the cache to merge into (default: ${ENV_CACHE} or {DEFAULT_CACHE})"
    )
    merge.add_argument(
        "--secret",
        default=None,
        help="the secret file of the machine that wrote SOURCE (its ~/.cache/lmms_eval_plugins/judge_cache.secret); "
        "default: this user's, for machines that share it",
    )
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    into = VerdictCache(args.into or default_cache_path())
    try:
        source_secret = load_secret(Path(args.secret).expanduser(), create=False) if args.secret else into.secret
        counts = merge_cache(args.source, into, source_secret)
    except (OSError, sqlite3.Error) as exc:
        print(f"lmms-eval-plugins judge-cache merge: {exc}", file=sys.stderr)
        return 2
    finally:
        into.close()
    print(
        f"merged {counts['merged']} verdict(s) from {args.source} into {into.path}; {counts['present']} already present; "
        f"dropped {counts['bad_mac']} whose HMAC does not match under the source's secret and {counts['invalid']} invalid"
        + (
            f"; dropped {counts['oversized']} with a column over the size cap (reply/detail over twice "
            f"{ENV_MAX_REPLY_BYTES}, other columns over {_SHORT_COLUMN_BYTES} bytes)"
            if counts["oversized"]
            else ""
        )
    )
    return 0
