"""The state file of ``score --batch`` (``judge_batches.json``): compact, each entry signed with the judge
cache secret by the machine that recorded it, verified when read (issue 36; see :mod:`.batch`)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .batch_requests import ID_HEX, ID_PREFIX

STATE_FILE = "judge_batches.json"
STATE_VERSION = 2  # 1: unsigned, one custom_id per list item (set aside when met)
ENV_MAX_STATE_BYTES = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_MAX_STATE_BYTES"
DEFAULT_MAX_STATE_BYTES = 64 * 2**20  # about 1.3 million recorded requests
_MAC_DOMAIN = b"lmms-eval-plugins judge_batches.json entry v2\n"  # never the same bytes as a cache row's MAC
# the fields of a state entry and their types (a signed entry has them by construction; checked anyway)
_ENTRY_FIELDS: dict[str, type | tuple[type, ...]] = {
    "endpoint": str,
    "ids": str,
    "lines": int,
    "bytes": int,
    "status": str,
    "recorded_at": str,
    "file_id": str,
    "batch_id": str,
    "ingested": bool,
    "outcome": str,
    "verdicts": int,
    "failed": int,
    "errors": list,
    "done_requests": int,
    "unknown_lines": int,
    "duplicate_lines": int,
    "requests_sha256": str,  # the recorded requests (score_batch.RECORDED_FILE) a resume may reuse
    "run_key": str,  # ... for the run and options they were collected for (score_batch.run_key)
    "mac": str,
}


class BatchStateError(ValueError):
    """``judge_batches.json`` cannot be used or set aside; the message names the file and the fix."""


def ids_text(custom_ids: Iterable[str]) -> str:
    """The custom_ids of a batch as stored: their hex digits, concatenated (no list of strings to parse)."""
    return "".join(cid[len(ID_PREFIX) :] for cid in custom_ids)


def entry_id_list(entry: Mapping[str, Any]) -> list[str]:
    text = entry["ids"]
    return [ID_PREFIX + text[i : i + ID_HEX] for i in range(0, len(text), ID_HEX)]


def entry_ids(entry: Mapping[str, Any]) -> set[str]:
    return set(entry_id_list(entry))


def entry_count(entry: Mapping[str, Any]) -> int:
    return len(entry["ids"]) // ID_HEX


def entry_mac(secret: bytes, entry: Mapping[str, Any]) -> str:
    """HMAC-SHA256 (hex) of every field of an entry but its ``mac``: endpoint, custom_ids, file and batch ids, status."""
    body = {k: v for k, v in entry.items() if k != "mac"}
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hmac.new(secret, _MAC_DOMAIN + blob.encode("ascii"), hashlib.sha256).hexdigest()


def entry_problem(secret: bytes, entry: Any) -> str | None:
    """Why a state entry is not resumed (None: this user recorded it, unchanged)."""
    if not isinstance(entry, dict):
        return "not an object"
    mac = entry.get("mac")
    if not isinstance(mac, str) or not mac:
        return "not signed"
    try:
        expected = entry_mac(secret, entry)
    except (TypeError, ValueError, RecursionError):
        return "its fields cannot be signed"
    if not hmac.compare_digest(mac, expected):
        return "its signature does not hold (recorded by another user or machine, or edited)"
    for name, kind in _ENTRY_FIELDS.items():
        value = entry.get(name)
        if name in entry and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            return f"field {name!r} is not a {getattr(kind, '__name__', kind)}"
    ids = entry.get("ids")
    if (
        not isinstance(entry.get("endpoint"), str)
        or not isinstance(ids, str)
        or len(ids) % ID_HEX
        or ids.strip("0123456789abcdef")
    ):
        return "it lacks its endpoint or custom_ids"
    return None


def check_state(
    path: Path, secret: bytes, max_bytes: int = DEFAULT_MAX_STATE_BYTES
) -> tuple[dict[str, Any], str | None]:
    """(the state to use: the verified entries only; why the file is not trusted as it is, None when it is)."""
    from lmms_eval_plugins.data import parse_json
    from lmms_eval_plugins.safe_files import read_stored

    empty: dict[str, Any] = {"version": STATE_VERSION, "batches": []}
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return empty, None
    except OSError as exc:
        return empty, f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return empty, "is a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return empty, "is not a regular file"
    if st.st_size > max_bytes:
        return empty, f"is {st.st_size:,} bytes, over the cap of {max_bytes:,} ({ENV_MAX_STATE_BYTES})"
    try:
        data = parse_json(read_stored(path, max_bytes)[0].decode("utf-8"))  # bounded: deep nesting is a named error
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return empty, f"is not readable JSON ({str(exc)[:200]})"
    if not isinstance(data, dict) or not isinstance(data.get("batches"), list):
        return empty, "is not a batch record"
    if data.get("version") != STATE_VERSION:
        return empty, (
            f"is a version-{str(data.get('version'))[:20]} batch record (written by an older version of the "
            "plugin, unsigned)"
        )
    kept, refused = [], []
    for i, entry in enumerate(data["batches"]):
        problem = entry_problem(secret, entry)
        if problem is None:
            kept.append(entry)
        else:
            refused.append(f"batches[{i}] {problem}")
    state = {"version": STATE_VERSION, "batches": kept}
    if refused:
        return (
            state,
            f"has {len(refused)} of {len(data['batches'])} batch(es) this user did not record here ({refused[0]})",
        )
    return state, None


def read_state(path: Path, secret: bytes | None = None, max_bytes: int = DEFAULT_MAX_STATE_BYTES) -> dict[str, Any]:
    """The state, every entry verified under ``secret`` (default: this user's judge cache secret);
    :class:`BatchStateError` naming the file and why when it does not verify."""
    from .cache import load_secret

    state, problem = check_state(Path(path), load_secret() if secret is None else secret, max_bytes)
    if problem is not None:
        raise BatchStateError(
            f"{path} {problem}; delete it (or let score --batch set it aside) to plan its requests afresh"
        )
    return state


def state_text(state: Mapping[str, Any], secret: bytes) -> str:
    """The state file's text: every entry signed, compact JSON (no indent; strict: no NaN)."""
    for entry in state["batches"]:
        entry["mac"] = entry_mac(secret, entry)
    return json.dumps(state, separators=(",", ":"), allow_nan=False) + "\n"


def write_state(path: Path, state: Mapping[str, Any], secret: bytes | None = None) -> str:
    """Sign and write the state (through the one atomic writer, mode 0600); returns the text written."""
    from lmms_eval_plugins.safe_files import write_atomic

    from .cache import load_secret

    text = state_text(state, load_secret() if secret is None else secret)
    write_atomic(path, text, mode=0o600)
    return text


def set_aside(path: Path) -> Path:
    """Rename an untrusted state file (or link) out of the way, never deleting it; returns its new path."""
    from lmms_eval_plugins.safe_files import move_into_place

    aside = path.with_name(f"{path.name}.untrusted-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    return move_into_place(path, aside)


def covered_ids(state: Mapping[str, Any], endpoint: str) -> set[str]:
    """custom_ids carried by this endpoint's batches that may still return verdicts (not yet ingested)."""
    return {
        cid for e in state["batches"] if e["endpoint"] == endpoint and not e.get("ingested") for cid in entry_id_list(e)
    }
