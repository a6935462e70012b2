"""Persistent cache of sampled video frames, so a second run over the same data decodes nothing.

An entry holds the frames one ``sample_video`` (or ``sample_frame_folder``) call returned, as raw
uint8 arrays compressed losslessly (zstandard, zlib where it is missing), plus what the sampler
returns beside them (indices, timestamps, frame rate, source size). Its key is a SHA-256 of:
the source files' identity (resolved path, size, mtime in ns), the sampling parameters, the format
version and the decord and Pillow versions (a new decoder may decode differently). A file edited in
place changes size or mtime and so misses; an entry is never served for a file it was not made from.

Layout under the cache folder::

    index.sqlite3             one row per entry: file, size, SHA-256 of the file, last use (WAL mode)
    entries/<xx>/<key>-<digest>.fc   magic, JSON header (key, codec, shapes, meta), compressed frames

Every read checks the file against the size and SHA-256 in its row and the key in its header; a
missing, truncated or altered file is deleted with its row and reported as a miss, so the caller
decodes again and stores a fresh entry. Writes go to a temporary file renamed into place, then the
row is committed, so a reader never sees half an entry; several processes may share one folder
(SQLite serialises the index, file names are content-addressed, and a file that vanishes under a
reader is a miss). The cache is capped (least recently used entries are evicted down to 90% of the
cap after a write) and never fatal: a failing disk or index turns it into misses with one warning.

Settings (read at every use, so tests and long-lived processes see changes):
``LMMS_EVAL_PLUGINS_FRAME_CACHE``: the folder, or ``off`` (also ``0``, ``false``, ``no``, ``none``);
default ``$LMMS_EVAL_PLUGINS_CACHE/frames`` (``~/.cache/lmms_eval_plugins/frames``).
``LMMS_EVAL_PLUGINS_FRAME_CACHE_MB``: the cap in MB (10^6 bytes), default 20000.

``python -m lmms_eval_plugins.frame_cache {stats,clear,gc}`` shows, empties or tidies the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from lmms_eval_plugins.safe_files import move_into_place, write_atomic
from lmms_eval_plugins.settings import BadSetting, cache_root, env_number, switched_off

try:  # a dependency of lmms-eval, so normally present; zlib keeps the cache working without it
    import zstandard
except ImportError:  # pragma: no cover - exercised only where zstandard is missing
    zstandard = None  # type: ignore[assignment]

FRAME_CACHE_ENV = "LMMS_EVAL_PLUGINS_FRAME_CACHE"
FRAME_CACHE_MB_ENV = "LMMS_EVAL_PLUGINS_FRAME_CACHE_MB"
DEFAULT_CAP_MB = 20_000
FORMAT_VERSION = 1
MAGIC = b"LEPFRM1\0"
LOW_WATER = 0.9  # eviction frees down to this fraction of the cap, so not every write evicts
ORPHAN_AGE_S = 3600.0  # gc leaves younger unreferenced files alone: a writer may be about to index them
OPEN_TIMEOUT_S = 60.0
ZSTD_LEVEL = 3  # bench/bench_codec.py, synthetic frames, 2-core CPU: 0.5-0.85 GB/s to compress, ~2 GB/s to
# decompress, ratio 3.7-4.2 (level 19: 4.2-4.4); camera footage not measured

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY,
    file TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    digest TEXT NOT NULL,
    created REAL NOT NULL,
    last_used REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_last_used ON entries (last_used);
CREATE TABLE IF NOT EXISTS probes (
    key TEXT PRIMARY KEY,
    info TEXT NOT NULL,
    last_used REAL NOT NULL
);
"""


def _warn(message: str) -> None:
    try:
        from loguru import logger

        logger.warning(message)
    except ImportError:  # pragma: no cover - lmms-eval depends on loguru
        import warnings

        warnings.warn(message, RuntimeWarning, stacklevel=3)


# ----------------------------------------------------------------------------------------------- settings


def cache_folder() -> Path | None:
    """The cache folder the environment asks for, or None when the cache is switched off."""
    if switched_off(FRAME_CACHE_ENV):
        return None
    raw = os.environ.get(FRAME_CACHE_ENV, "").strip()
    if raw:
        return Path(raw).expanduser()
    return cache_root() / "frames"


def cap_bytes() -> int:
    try:
        mb = env_number(FRAME_CACHE_MB_ENV, DEFAULT_CAP_MB, minimum=0, clamp=True)
    except BadSetting as exc:
        _warn(f"{exc}; using {DEFAULT_CAP_MB} MB")
        mb = DEFAULT_CAP_MB
    return int(mb * 1_000_000)


_CACHES: dict[tuple[int, str, int], FrameCache] = {}
_CACHES_LOCK = threading.Lock()


def get_cache() -> FrameCache | None:
    """This process's cache for the current settings, or None when switched off (or unusable)."""
    folder = cache_folder()
    if folder is None:
        return None
    setting = (os.getpid(), str(folder), cap_bytes())
    with _CACHES_LOCK:
        cache = _CACHES.get(setting)
        if cache is None:
            cache = _CACHES[setting] = FrameCache(folder, setting[2])
    return None if cache.disabled else cache


# ----------------------------------------------------------------------------------------------- keys


@lru_cache(maxsize=1)
def decoder_versions() -> dict[str, str]:
    """Versions of what turns a file into pixels: a change there may change the frames."""
    out = {}
    for package in ("decord", "pillow"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "missing"
    return out


def identity(path: Path) -> list[Any]:
    """[resolved path, size, mtime in ns]: changes whenever the file is replaced or edited."""
    stat = path.stat()
    return [str(path.resolve()), stat.st_size, stat.st_mtime_ns]


def sampling_key(kind: str, identities: Sequence[Sequence[Any]], params: Mapping[str, Any]) -> str:
    payload = {
        "format": FORMAT_VERSION,
        "kind": kind,
        "sources": [list(i) for i in identities],
        "params": dict(params),
        "decoders": decoder_versions(),
    }
    # default=str: a numpy number in the parameters still gives a stable key
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


# ----------------------------------------------------------------------------------------------- codec


def _compress(arrays: Sequence[np.ndarray]) -> tuple[str, bytes]:
    if zstandard is not None:
        codec, chunks = "zstd", zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj()
    else:
        codec, chunks = "zlib", zlib.compressobj(1)
    out = [chunks.compress(memoryview(a).cast("B")) for a in arrays]
    out.append(chunks.flush())
    return codec, b"".join(out)


def _decompress(codec: str, payload: memoryview, size: int) -> bytes:
    if codec == "zstd":
        if zstandard is None:
            raise ValueError("entry is zstd-compressed and zstandard is not installed")
        return zstandard.ZstdDecompressor().decompress(payload, max_output_size=size)
    if codec == "zlib":
        return zlib.decompress(payload)
    raise ValueError(f"unknown codec {codec!r}")


def encode_entry(key: str, arrays: Sequence[np.ndarray], meta: Mapping[str, Any]) -> bytes:
    arrays = [np.ascontiguousarray(a) for a in arrays]
    if any(a.dtype != np.uint8 for a in arrays):
        raise TypeError("the frame cache stores uint8 frames only")
    codec, payload = _compress(arrays)
    header = json.dumps(
        {
            "key": key,
            "codec": codec,
            "shapes": [list(a.shape) for a in arrays],
            "raw_bytes": sum(a.nbytes for a in arrays),
            "meta": dict(meta),
        },
        allow_nan=False,
    ).encode()
    return MAGIC + struct.pack("<I", len(header)) + header + payload


@dataclass
class CachedFrames:
    frames: list[np.ndarray]  # read-only views of one buffer: copy (e.g. Image.fromarray) before changing
    meta: dict[str, Any]


def decode_entry(key: str, blob: bytes) -> CachedFrames:
    """The frames and meta of an entry; ValueError (or another exception) when it is not a sound entry of ``key``."""
    if blob[: len(MAGIC)] != MAGIC:
        raise ValueError("not a frame cache entry")
    (length,) = struct.unpack_from("<I", blob, len(MAGIC))
    start = len(MAGIC) + 4
    header = json.loads(blob[start : start + length])
    if header.get("key") != key:
        raise ValueError("entry belongs to another key")
    shapes = [tuple(int(n) for n in s) for s in header["shapes"]]
    sizes = [int(np.prod(s)) for s in shapes]
    raw = _decompress(header["codec"], memoryview(blob)[start + length :], int(header["raw_bytes"]))
    if len(raw) != sum(sizes) or sum(sizes) != header["raw_bytes"]:
        raise ValueError("entry holds the wrong number of bytes")
    flat = np.frombuffer(raw, dtype=np.uint8)
    frames, offset = [], 0
    for shape, size in zip(shapes, sizes):
        frames.append(flat[offset : offset + size].reshape(shape))
        offset += size
    if not isinstance(header["meta"], dict):
        raise ValueError("entry meta is not an object")
    return CachedFrames(frames, header["meta"])


# ----------------------------------------------------------------------------------------------- counters


@dataclass
class Counters:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    rejected: int = 0  # corrupt or truncated entries found (and removed)
    evicted: int = 0


COUNTERS = Counters()  # this process, every cache folder: read by the progress line and the bench
_COUNT_LOCK = threading.Lock()


def _count(field: str, n: int = 1) -> None:
    with _COUNT_LOCK:
        setattr(COUNTERS, field, getattr(COUNTERS, field) + n)


# ----------------------------------------------------------------------------------------------- cache


class FrameCache:
    """One cache folder. Thread-safe (a SQLite connection per thread) and shareable by processes."""

    def __init__(self, root: Path, cap: int) -> None:
        self.root = Path(root)
        self.cap = cap
        self.disabled = False
        self._local = threading.local()
        self._warned: set[str] = set()
        try:
            (self.root / "entries").mkdir(parents=True, exist_ok=True)
            self._connect()
        except (OSError, sqlite3.Error) as exc:
            self._give_up(f"cannot open the frame cache in {self.root} ({exc}); frames are decoded without it")

    @property
    def index_path(self) -> Path:
        return self.root / "index.sqlite3"

    # -- plumbing

    def _give_up(self, message: str) -> None:
        self.disabled = True
        _warn(message)

    def _warn_once(self, what: str, exc: BaseException) -> None:
        if what not in self._warned:
            self._warned.add(what)
            _warn(f"frame cache in {self.root}: {what} failed ({exc}); going on without it for such calls")

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        try:
            conn = self._open()
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc):
                raise
            self._set_aside(exc)
            conn = self._open()
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _open(self) -> sqlite3.Connection:
        # Switching to WAL can fail at once with "database is locked" while other processes create
        # the same index (SQLite's busy timeout does not cover that step): retry for a while.
        deadline, pause = time.monotonic() + OPEN_TIMEOUT_S, 0.02
        while True:
            conn = sqlite3.connect(self.index_path, timeout=OPEN_TIMEOUT_S, isolation_level=None)
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_SCHEMA)
                return conn
            except sqlite3.OperationalError as exc:
                conn.close()
                text = str(exc).lower()
                if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                    raise
            except BaseException:
                conn.close()
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _set_aside(self, exc: BaseException) -> None:
        """A damaged index is moved aside (its files become orphans for gc) and a new one started."""
        aside = self.index_path.with_name(f"index.sqlite3.corrupt-{os.getpid()}-{int(time.time())}")
        _warn(f"frame cache index {self.index_path} is damaged ({exc}); moved to {aside.name}, starting a new one")
        for suffix in ("", "-wal", "-shm"):
            try:
                move_into_place(f"{self.index_path}{suffix}", f"{aside}{suffix}")
            except FileNotFoundError:
                pass

    def _write(self, statements: Sequence[tuple[str, tuple]]) -> list[list[tuple]]:
        """Run statements in one IMMEDIATE transaction (one writer at a time across processes)."""
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            out = [conn.execute(sql, args).fetchall() for sql, args in statements]
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return out

    def _path(self, name: str) -> Path:
        return self.root / "entries" / name[:2] / name

    # -- frames

    def get(self, key: str) -> CachedFrames | None:
        """The entry for ``key`` if it is present and sound; a bad one is removed and None returned."""
        if self.disabled:
            return None
        try:
            row = self._connect().execute("SELECT file, bytes, digest FROM entries WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            self._warn_once("reading the index", exc)
            _count("misses")
            return None
        if row is None:
            _count("misses")
            return None
        name, size, digest = row
        try:
            blob = self._path(name).read_bytes()
        except FileNotFoundError:  # evicted or cleared by another process since the SELECT
            self._forget(key, name)
            _count("misses")
            return None
        except OSError as exc:
            self._warn_once("reading an entry", exc)
            _count("misses")
            return None
        try:
            if len(blob) != size or hashlib.sha256(blob).hexdigest() != digest:
                raise ValueError("size or checksum differs from the index")
            entry = decode_entry(key, blob)
        except Exception:  # corrupt, truncated or foreign: never used, rebuilt by the caller
            self._forget(key, name, remove_file=True)
            _count("rejected")
            _count("misses")
            return None
        try:
            self._write([("UPDATE entries SET last_used = ? WHERE key = ?", (time.time(), key))])
        except sqlite3.Error as exc:  # only the LRU order suffers
            self._warn_once("updating the last use", exc)
        _count("hits")
        return entry

    def _forget(self, key: str, name: str, *, remove_file: bool = False) -> None:
        try:
            self._write([("DELETE FROM entries WHERE key = ? AND file = ?", (key, name))])
        except sqlite3.Error as exc:
            self._warn_once("removing a bad entry", exc)
        if remove_file:
            _unlink(self._path(name))

    def put(self, key: str, frames: Sequence[np.ndarray], meta: Mapping[str, Any]) -> bool:
        """Store an entry (replacing any under ``key``); False when it was not stored (too big, I/O error)."""
        if self.disabled or not frames:
            return False
        try:
            blob = encode_entry(key, frames, meta)
        except (TypeError, ValueError) as exc:  # e.g. a NaN in the meta: decode next time instead
            self._warn_once("encoding an entry", exc)
            return False
        if len(blob) > self.cap * LOW_WATER:
            return False
        digest = hashlib.sha256(blob).hexdigest()
        name = f"{key}-{digest[:16]}.fc"  # content-addressed: racing writers of one entry agree
        path = self._path(name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, blob)  # a temp file of its own, renamed: never through a planted link
        except OSError as exc:
            self._warn_once("writing an entry", exc)
            return False
        now = time.time()
        try:
            old, total = self._write(
                [
                    ("SELECT file FROM entries WHERE key = ?", (key,)),
                    ("SELECT COALESCE(SUM(bytes), 0) FROM entries WHERE key != ?", (key,)),
                    (
                        "INSERT OR REPLACE INTO entries (key, file, bytes, digest, created, last_used) VALUES (?, ?, ?, ?, ?, ?)",
                        (key, name, len(blob), digest, now, now),
                    ),
                ]
            )[:2]
            evicted = self._evict(key) if total[0][0] + len(blob) > self.cap else []
        except sqlite3.Error as exc:
            self._warn_once("indexing an entry", exc)
            return False
        if old and old[0][0] != name:
            _unlink(self._path(old[0][0]))
        for victim in evicted:
            _unlink(self._path(victim))
        _count("writes")
        return True

    def _evict(self, keep: str) -> list[str]:
        """Delete least recently used rows down to the low-water mark; their files go after the commit."""
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            total = conn.execute("SELECT COALESCE(SUM(bytes), 0) FROM entries").fetchone()[0]
            target = int(self.cap * LOW_WATER)
            victims: list[tuple[str, str]] = []
            for key, name, size in conn.execute("SELECT key, file, bytes FROM entries ORDER BY last_used, key"):
                if total <= target:
                    break
                if key != keep:
                    victims.append((key, name))
                    total -= size
            conn.executemany("DELETE FROM entries WHERE key = ?", [(k,) for k, _ in victims])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        _count("evicted", len(victims))
        return [name for _, name in victims]

    # -- video probes (frame count, rate, size): tiny rows, so `video_info` needs no decoding either

    def get_info(self, key: str) -> dict[str, Any] | None:
        if self.disabled:
            return None
        try:
            row = self._connect().execute("SELECT info FROM probes WHERE key = ?", (key,)).fetchone()
            return json.loads(row[0]) if row else None
        except (sqlite3.Error, ValueError) as exc:
            self._warn_once("reading a probe", exc)
            return None

    def put_info(self, key: str, info: Mapping[str, Any]) -> None:
        if self.disabled:
            return
        try:
            self._write(
                [
                    (
                        "INSERT OR REPLACE INTO probes (key, info, last_used) VALUES (?, ?, ?)",
                        (key, json.dumps(dict(info), allow_nan=False), time.time()),
                    )
                ]
            )
        except (sqlite3.Error, ValueError) as exc:
            self._warn_once("storing a probe", exc)

    # -- maintenance

    def stats(self) -> dict[str, Any]:
        conn = self._connect()
        entries, size = conn.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM entries").fetchone()
        probes = conn.execute("SELECT COUNT(*) FROM probes").fetchone()[0]
        return {"folder": str(self.root), "entries": entries, "bytes": size, "cap_bytes": self.cap, "probes": probes}

    def clear(self) -> int:
        """Delete every entry and probe; returns the number of entries removed."""
        names = [
            r[0]
            for r in self._write(
                [("SELECT file FROM entries", ()), ("DELETE FROM entries", ()), ("DELETE FROM probes", ())]
            )[0]
        ]
        for name in names:
            _unlink(self._path(name))
        self.gc(min_age_s=0.0)
        return len(names)

    def gc(self, min_age_s: float = ORPHAN_AGE_S) -> int:
        """Remove entry files no row points to (a writer killed mid-way, a moved-aside index)."""
        known = {r[0] for r in self._connect().execute("SELECT file FROM entries")}
        removed, now = 0, time.time()
        for path in (self.root / "entries").glob("*/*"):
            if path.name in known:
                continue
            try:
                if now - path.stat().st_mtime >= min_age_s:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
        return removed


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:  # e.g. a read-only share: leave it for gc
        _warn(f"cannot remove {path}: {exc}")


def _is_corrupt(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


# ----------------------------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lmms_eval_plugins.frame_cache",
        description="Show, empty or tidy the frame cache (settings from the environment).",
    )
    parser.add_argument("command", choices=("stats", "clear", "gc"))
    parser.add_argument("--folder", type=Path, help=f"the cache folder (default: from {FRAME_CACHE_ENV})")
    args = parser.parse_args(argv)
    folder = args.folder or cache_folder()
    if folder is None:
        print(f"the frame cache is switched off ({FRAME_CACHE_ENV}={os.environ.get(FRAME_CACHE_ENV)})")
        return 0
    cache = FrameCache(folder, cap_bytes())
    if cache.disabled:
        return 1
    if args.command == "clear":
        print(f"removed {cache.clear()} entries from {folder}")
    elif args.command == "gc":
        print(f"removed {cache.gc()} unreferenced files from {folder}")
    stats = cache.stats()
    print(
        f"{stats['folder']}: {stats['entries']} entries, {stats['bytes'] / 1e6:.1f} MB of "
        f"{stats['cap_bytes'] / 1e6:.0f} MB cap, {stats['probes']} video probes"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
