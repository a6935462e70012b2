"""Where a benchmark's records and media come from: the hub, a local data root, or the bundled sample.

Every task YAML points lmms-eval at a one-row JSON "source" file next to it (``dataset_path: json``;
lmms-eval resolves ``data_files`` relative to the YAML). The row says which benchmark and which source
to use; the task's ``process_docs`` hands it to :func:`resolve_source` and loads the real records
through the helpers below. That keeps the three sources behind one code path:

- ``sample``: the data bundled in the task folder (``sample_data/``), in the same layout as a local root;
- ``auto``:   ``$LMMS_EVAL_PLUGINS_DATA_ROOT/<benchmark>/`` when the variable is set, else the hub
  (through the Hugging Face cache, so ``HF_HUB_OFFLINE=1`` works after a first download).

Paths inside records are relative to the benchmark folder and may not escape it.
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import Any, Literal

from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.outcome import SKIPPED_FIELD
from lmms_eval_plugins.safe_files import move_into_place, write_new
from lmms_eval_plugins.settings import CACHE_ENV, BadSetting, cache_root, env_number  # noqa: F401 (CACHE_ENV: re-exported)

DATA_ROOT_ENV = "LMMS_EVAL_PLUGINS_DATA_ROOT"
SKIP_MISSING_MEDIA_ENV = "LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA"

SourceKind = Literal["sample", "local", "hub"]
# The longest file or folder name Linux and macOS file systems take (bytes).
NAME_MAX = 255


@dataclass(frozen=True)
class DataSource:
    benchmark: str
    kind: SourceKind
    root: Path | None = None  # benchmark folder (sample/local) or the hub snapshot's local copy
    hub_repo: str | None = None

    def describe(self) -> str:
        return (
            f"{self.benchmark} from the hub ({self.hub_repo})"
            if self.kind == "hub"
            else f"{self.benchmark} from {self.root}"
        )


def source_spec(dataset: Any) -> dict[str, Any]:
    """Read the one-row source file that every task YAML loads (see module docstring)."""
    rows = list(dataset)
    if len(rows) != 1 or "benchmark" not in rows[0]:
        raise DataError(
            "a task's source file must hold exactly one row with a 'benchmark' field",
            fix="reinstall lmms-eval-plugins; the task folder is damaged",
        )
    return dict(rows[0])


def resolve_source(
    benchmark: str, source: str, *, sample_dir: Path | None, hub_repo: str | None, local_layout: str
) -> DataSource:
    """Decide where ``benchmark`` is read from. ``local_layout`` is shown to users in errors."""
    if source == "sample":
        if sample_dir is None or not sample_dir.is_dir():
            raise DataError(
                f"the bundled sample of {benchmark} is missing",
                path=str(sample_dir or "(not set: load the task through its utils.py)"),
                fix="reinstall lmms-eval-plugins (sample data ships inside the wheel)",
            )
        return DataSource(benchmark, "sample", sample_dir)
    if source != "auto":
        raise DataError(f"unknown data source {source!r} for {benchmark}", fix="use 'auto' or 'sample'")
    data_root = os.environ.get(DATA_ROOT_ENV)
    if data_root:
        folder = Path(data_root).expanduser().resolve() / benchmark
        if not folder.is_dir():
            raise DataError(
                f"{DATA_ROOT_ENV} is set but holds no '{benchmark}' folder",
                path=str(folder),
                fix=f"put the data in this layout: {local_layout}",
            )
        return DataSource(benchmark, "local", folder)
    if hub_repo is None:
        raise DataError(
            f"the {benchmark} data is not public yet, so it cannot be downloaded",
            fix=f"set {DATA_ROOT_ENV}=/path/to/data with this layout: {local_layout} "
            f"(or run the bundled sample: --tasks {benchmark}_sample)",
        )
    return DataSource(benchmark, "hub", None, hub_repo)


def safe_path(
    root: str | Path,
    value: Any,
    *,
    record: str | None,
    field: str = "path",
    name: bool = False,
    under: str = "",
    suffix: str = "",
    within: str | Path | None = None,
) -> Path:
    """The one containment rule for every path built from data: the real path of ``root/under/value+suffix``.

    ``value`` comes from the data: a path relative to ``root`` or, with ``name=True``, an id used as a
    file name. It must be a non-empty string, relative (no leading ``/``, no drive), with ``/`` as the
    only separator (no backslash), no NUL byte and no ``..`` component; with ``name=True`` it may hold no
    ``/`` and no ``..`` at all. ``under`` (a folder) and ``suffix`` (an extension) come from code.
    Symbolic links are resolved (``os.path.realpath``) and the real path must lie inside the real
    ``within`` (default: ``root``): a link pointing elsewhere inside it is fine, one pointing out is not.
    ``within`` is wider than ``root`` only where the data's own files are links into a store next to
    it (a hub snapshot, see :func:`hub_store`) or to check a file against the benchmark folder it sits
    in. The path need not exist. Anything else raises :class:`DataError` naming the record, the field,
    the offending value and the root, with the fix.
    """

    def refuse(problem: str, fix: str) -> DataError:
        return DataError(f"{field} {value!r} {problem}", record=record, path=str(root), fix=fix)

    relative_fix = (
        f"write the record's {field} relative to the benchmark folder, with '/' separators, "
        "and keep it inside that folder"
    )
    if not isinstance(value, str):
        raise refuse("is not a string", relative_fix)
    if not value.strip():
        raise refuse("is empty", f"fill in the record's {field}")
    if "\0" in value:
        raise refuse("holds a NUL byte", f"remove the NUL byte from the record's {field}")
    if problem := id_text_problem(value):  # a control or bidi character shows the name as another one
        raise refuse(problem, f"give the record a {field} of printable characters")
    if "\\" in value:
        raise refuse("holds a backslash; only '/' separates folders here", relative_fix)
    if PureWindowsPath(value).anchor or Path(value).is_absolute():
        raise refuse("is absolute, so it escapes the benchmark folder", relative_fix)
    if name and ("/" in value or ".." in value):
        raise refuse(
            "is used as a file name, so it may hold no '/' and no '..'",
            f"give the record a plain {field} (letters, digits, '_', '-', '.')",
        )
    if ".." in value.split("/"):
        raise refuse("escapes the benchmark folder ('..')", relative_fix)
    longest = max((value + suffix).split("/"), key=lambda part: len(part.encode("utf-8", "surrogatepass")))
    if len(longest.encode("utf-8", "surrogatepass")) > NAME_MAX:  # else the first stat() is an OSError
        raise refuse(
            f"holds a name of {len(longest.encode('utf-8', 'surrogatepass'))} bytes; file systems allow {NAME_MAX}",
            f"rename the file (and the record's {field}) to at most {NAME_MAX} bytes a name",
        )
    container = Path(os.path.realpath(within if within is not None else root))
    real = Path(os.path.realpath(Path(root, under, value + suffix)))
    if not real.is_relative_to(container):
        raise refuse(
            f"escapes the benchmark folder: it resolves to {real}, outside {container} "
            "(a symbolic link pointing out of the folder)",
            "copy the file into the benchmark folder, or link it to a place inside that folder",
        )
    return real


def hub_store(snapshot: Path) -> Path:
    """The hub cache folder of the repository a ``snapshot_download`` folder belongs to.

    A snapshot's files are symbolic links into the repository's ``blobs/`` folder next to ``snapshots/``:
    pass this as ``within`` to :func:`safe_path` for paths read from a snapshot.
    """
    return snapshot.parent.parent if snapshot.parent.name == "snapshots" else snapshot


def require_file(path: Path, *, record: str, what: str, fix: str) -> Path:
    if not path.is_file():
        raise MediaError(f"{what} not found", record=record, path=str(path), fix=fix)
    return path


def find_with_extensions(
    root: Path,
    stem: str,
    extensions: Sequence[str],
    *,
    record: str | None,
    field: str = "question_id",
    under: str = "",
    within: Path | None = None,
) -> Path | None:
    """The first existing ``root/under/<stem>.<ext>``; ``stem`` (an id from the data) goes through :func:`safe_path`."""
    for ext in extensions:
        path = safe_path(
            root, stem, record=record, field=field, name=True, under=under, suffix=f".{ext}", within=within
        )
        if path.is_file():
            return path
    return None


def require_unique(
    records: Sequence[Mapping[str, Any]], field: str, *, path: Path, where: Callable[[int], str]
) -> None:
    """A ``DataError`` naming the first id used twice, both places (``where(index)``: "line 3") and the file."""
    first: dict[Any, int] = {}
    for index, record in enumerate(records):
        key = record.get(field)
        if isinstance(key, str):
            problem = id_text_problem(key)
            if problem:
                raise DataError(
                    f"{field} {key.encode('unicode_escape').decode('ascii')[:80]!r} {problem} ({where(index)})",
                    record=key.encode("unicode_escape").decode("ascii")[:80],
                    path=str(path),
                    fix=f"give the record a {field} of printable characters",
                )
            key = unicodedata.normalize("NFC", key)  # the NFC and NFD spellings of one id are one id
        if key in first:
            raise DataError(
                f"{field} {key!r} is used twice ({where(first[key])} and {where(index)})",
                record=str(key),
                path=str(path),
                fix=f"give every record its own {field}",
            )
        first[key] = index


# bidi embeddings, overrides, isolates and marks: an id holding one shows as another id
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def id_text_problem(key: str) -> str | None:
    """Why ``key`` cannot be a record id (a control character, NUL included; a bidi control; a combining mark
    first), or None."""
    for char in key:
        if unicodedata.category(char) == "Cc":
            return f"holds the control character U+{ord(char):04X}"
        if char in _BIDI:
            return f"holds the bidi control U+{ord(char):04X}"
    if key and unicodedata.combining(key[0]):
        return f"starts with the combining mark U+{ord(key[0]):04X}"
    return None


def skip_missing_media() -> bool:
    return os.environ.get(SKIP_MISSING_MEDIA_ENV, "") not in ("", "0", "false", "False")


MISSING_MEDIA = "missing media"
UNREADABLE_MEDIA = "unreadable media"


class Kept(list):
    """Records kept for a run, with ``skipped``: {reason: records left out}, for :func:`stamp_skipped`."""

    skipped: dict[str, int]


def media_skip_reason(error: MediaError) -> str:
    return MISSING_MEDIA if error.path and not Path(error.path).exists() else UNREADABLE_MEDIA


def keep_records_with_media(
    benchmark: str, records: Iterable[Any], check: Callable[[Any], None], *, skipped: Mapping[str, int] | None = None
) -> Kept:
    """Run ``check`` (raises MediaError) on each record; skip failures only when the user asked to.

    ``skipped``: records the caller already left out, by reason; the result counts both.
    """
    kept, counts = Kept(), Counter({k: v for k, v in (skipped or {}).items() if v})
    for record in records:
        try:
            check(record)
        except MediaError as exc:
            if not skip_missing_media():
                raise
            counts[media_skip_reason(exc)] += 1
            continue
        kept.append(record)
    kept.skipped = dict(sorted(counts.items()))
    if counts:
        from loguru import logger

        logger.warning(
            f"[{benchmark}] left out {sum(counts.values())} record(s): "
            + ", ".join(f"{n} {reason}" for reason, n in kept.skipped.items())
            + " (reported as the 'skipped' and 'skipped_by_reason' metrics)"
        )
    if not kept:
        raise DataError(f"no {benchmark} record has its media", fix="check the data folder layout")
    return kept


def stamp_skipped(docs: Iterable[dict[str, Any]], records: Any) -> list[dict[str, Any]]:
    """Every doc carries the run's skipped-records counts (``records``: a :class:`Kept`), read by aggregation:
    ``[{"reason": ..., "count": ...}]`` by reason, a list of structs in Arrow (``[]`` when none was skipped)."""
    skipped = sorted((getattr(records, "skipped", {}) or {}).items())
    out = []
    for doc in docs:
        doc[SKIPPED_FIELD] = [{"reason": str(reason), "count": int(count)} for reason, count in skipped]
        out.append(doc)
    return out


# ------------------------------------------------------------------------------- the hub and downloads
# Hub files go through huggingface_hub (its cache, HF_HUB_OFFLINE, HF_TOKEN, its own retries and resume);
# other URLs (ErrorRadar's images) through fetch_url below. Failures of both become our named errors.

DOWNLOAD_TIMEOUT_ENV = "LMMS_EVAL_PLUGINS_DOWNLOAD_TIMEOUT"
DOWNLOAD_RETRIES_ENV = "LMMS_EVAL_PLUGINS_DOWNLOAD_RETRIES"
DEFAULT_DOWNLOAD_TIMEOUT = 30.0  # seconds to connect, and between two reads, per attempt
DEFAULT_DOWNLOAD_RETRIES = 3  # attempts after the first, on a timeout, a dropped connection or HTTP 408/429/5xx
_RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
# The timeout above bounds each socket read: a server trickling a byte at a time never trips it. These bound
# one file's whole download (every attempt) and its size (an endless body is not an image).
DOWNLOAD_DEADLINE_ENV = "LMMS_EVAL_PLUGINS_DOWNLOAD_DEADLINE"
DOWNLOAD_MAX_BYTES_ENV = "LMMS_EVAL_PLUGINS_DOWNLOAD_MAX_BYTES"
DEFAULT_DOWNLOAD_DEADLINE = 120.0  # seconds for one file, all attempts together
DEFAULT_DOWNLOAD_MAX_BYTES = 50_000_000  # ErrorRadar's images are well under 1 MB


def _local_data_fix() -> str:
    return (
        f"or download the data once and set {DATA_ROOT_ENV}=/path/to/data "
        "(layout: see the task README, `lmms-eval-plugins info TASK`)"
    )


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return text if len(text) <= limit else text[:limit] + "..."


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE=1``, as huggingface_hub reads it: no download at all, hub files or image URLs."""
    from huggingface_hub import constants

    return bool(getattr(constants, "is_offline_mode", lambda: constants.HF_HUB_OFFLINE)())


HUB_PROBE_TIMEOUT_S = 5.0


def hub_unreachable(repo_id: str, *, offline: bool | None = None, timeout: float = HUB_PROBE_TIMEOUT_S) -> str | None:
    """Why the hub dataset ``repo_id`` cannot be downloaded now, in words; None when the hub answers.

    One bounded request (any HTTP answer counts: a gated or missing dataset is told by the download
    itself). ``offline``: ``HF_HUB_OFFLINE`` as the user set it (default: as huggingface_hub reads it).
    """
    from huggingface_hub import constants

    from lmms_eval_plugins.bounded_http import BodyTooLarge, fetch

    if hub_offline() if offline is None else offline:
        return "HF_HUB_OFFLINE=1 forbids downloading"
    try:
        fetch(f"{constants.ENDPOINT}/api/datasets/{repo_id}", max_bytes=1 << 20, deadline=timeout, timeout=timeout)
    except BodyTooLarge:  # an answer all the same
        return None
    except Exception as exc:  # refused, no route, no DNS, deadline: no download can work now
        return f"the hub ({constants.ENDPOINT}) cannot be reached: {type(exc).__name__}: {_first_line(exc)}"
    return None


def _hub_error(exc: Exception, repo_id: str, what: str, url: str | None) -> DataError:
    """A failed hub download as a DataError: what failed (repo, file), why, and the fix.

    Errors are told apart by class name, so every supported huggingface_hub version is covered.
    """
    from huggingface_hub import constants

    chain, seen = [], exc
    while seen is not None and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    names = {cls.__name__ for error in chain for cls in type(error).__mro__}
    response = next((r for r in (getattr(error, "response", None) for error in chain) if r is not None), None)
    status = getattr(response, "status_code", None)
    url = str(getattr(response, "url", "") or "") or url
    page = f"{constants.ENDPOINT}/datasets/{repo_id}"
    offline = hub_offline()
    if "GatedRepoError" in names:
        why = "no Hugging Face token was sent" if status == 401 else "the token sent has not been granted access"
        return DataError(
            f"{what} of the hub dataset {repo_id} is gated: {why} (HTTP {status})",
            path=url,
            fix=f"accept the dataset's terms on {page} while logged in, then set HF_TOKEN to a token "
            f"of that account (or run `hf auth login`); {_local_data_fix()}",
        )
    if "RepositoryNotFoundError" in names:
        return DataError(
            f"the hub dataset {repo_id} was not found (HTTP {status}): it does not exist, or it is "
            "private and no token with access was sent",
            path=url,
            fix=f"check the name on {page}; if it is private, set HF_TOKEN to a token with access; {_local_data_fix()}",
        )
    if "RevisionNotFoundError" in names:
        return DataError(
            f"the hub dataset {repo_id} has no such revision (HTTP {status})",
            path=url,
            fix=f"use its main branch; {_local_data_fix()}",
        )
    if "RemoteEntryNotFoundError" in names or ("EntryNotFoundError" in names and status == 404):
        return DataError(
            f"{what} is not in the hub dataset {repo_id} (HTTP 404)",
            path=url,
            fix=f"the dataset's layout may have changed: compare {page}/tree/main with the layout in "
            f"the task README; {_local_data_fix()}",
        )
    if offline or "OfflineModeIsEnabled" in names:
        return DataError(
            f"{what} of the hub dataset {repo_id} is not in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}), and HF_HUB_OFFLINE=1 forbids downloading it",
            path=url,
            fix="run once with network access (HF_HUB_OFFLINE unset) to fill the cache, or point "
            f"HF_HUB_CACHE (or HF_HOME) at the cache that holds it; {_local_data_fix()}",
        )
    root = chain[-1]  # the first failure (a refused connection, a timeout), not huggingface_hub's summary
    reason = f"HTTP {status}" if status else f"{type(root).__name__}: {_first_line(root)}"
    return DataError(
        f"could not download {what} from the hub dataset {repo_id} ({reason})",
        path=url,
        fix=f"check the network and the hub address ({constants.ENDPOINT}; HF_ENDPOINT changes it), "
        f"then run again: cached files are reused and downloads resume; {_local_data_fix()}",
    )


def hub_file(repo_id: str, filename: str) -> Path:
    """A file of a hub dataset, through the Hugging Face cache (works with HF_HUB_OFFLINE=1 once cached)."""
    from huggingface_hub import hf_hub_download, hf_hub_url

    try:
        return Path(hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset"))
    except Exception as exc:  # network, auth, missing file, offline without cache: say what to do
        url = hf_hub_url(repo_id, filename, repo_type="dataset")
        raise _hub_error(exc, repo_id, filename, url) from exc


def _describe_patterns(patterns: Sequence[str]) -> str:
    shown = ", ".join(patterns[:3])
    return shown + (f" (and {len(patterns) - 3} more)" if len(patterns) > 3 else "")


def _matches_any(folder: Path, patterns: Sequence[str]) -> bool:
    """Whether ``folder`` holds a file matching one of ``patterns`` (``snapshot_download``'s matching)."""
    from huggingface_hub.utils import filter_repo_objects

    if any((folder / p).is_file() for p in patterns if not any(c in p for c in "*?[")):
        return True  # the cheap answer: a literal file name is there
    present = [Path(base, name).relative_to(folder).as_posix() for base, _, names in os.walk(folder) for name in names]
    return any(True for _ in filter_repo_objects(present, allow_patterns=list(patterns)))


def hub_snapshot(repo_id: str, allow_patterns: Sequence[str] | None = None) -> Path:
    """A local copy of (part of) a hub dataset repository, through the Hugging Face cache.

    Raises :class:`DataError` when the download fails or when no file of the repository matches
    ``allow_patterns`` (the dataset's layout is not the one the task expects).
    """
    from huggingface_hub import snapshot_download

    patterns = list(allow_patterns or [])
    what = f"the files matching {_describe_patterns(patterns)}" if patterns else "the files"
    try:
        folder = Path(snapshot_download(repo_id=repo_id, repo_type="dataset", allow_patterns=patterns or None))
    except Exception as exc:
        raise _hub_error(exc, repo_id, what, None) from exc
    if patterns and not _matches_any(folder, patterns):
        raise DataError(
            f"the hub dataset {repo_id} has no file matching {_describe_patterns(patterns)}",
            path=str(folder),
            fix=f"the dataset's layout may have changed: compare it with the layout in the task "
            f"README; {_local_data_fix()}",
        )
    return folder


def cache_dir(*parts: str) -> Path:
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def download_settings() -> tuple[float, int]:
    """(timeout in seconds, retries) for :func:`fetch_url`, from the environment (see the names above)."""

    def read(name: str, default: float, whole: bool, minimum: float) -> float:
        try:
            return env_number(name, default, whole=whole, minimum=minimum)
        except BadSetting:
            raise DataError(
                f"{name}={os.environ.get(name, '').strip()!r} is not a valid setting",
                fix=f"set {name} to a {'whole ' if whole else ''}number of at least {minimum:g} "
                f"(default {default:g}), or unset it",
            ) from None

    return (
        float(read(DOWNLOAD_TIMEOUT_ENV, DEFAULT_DOWNLOAD_TIMEOUT, False, 0.001)),
        int(read(DOWNLOAD_RETRIES_ENV, DEFAULT_DOWNLOAD_RETRIES, True, 0)),
    )


def download_limits() -> tuple[float, int]:
    """(deadline in seconds for one file, all attempts; largest file in bytes) for :func:`fetch_url`."""

    def read(name: str, default: float, whole: bool) -> float:
        try:
            return env_number(name, default, whole=whole, minimum=1 if whole else 0.001)
        except BadSetting:
            raise DataError(
                f"{name}={os.environ.get(name, '').strip()!r} is not a valid setting",
                fix=f"set {name} to a positive {'whole ' if whole else ''}number (default {default:g}), or unset it",
            ) from None

    return (
        float(read(DOWNLOAD_DEADLINE_ENV, DEFAULT_DOWNLOAD_DEADLINE, False)),
        int(read(DOWNLOAD_MAX_BYTES_ENV, DEFAULT_DOWNLOAD_MAX_BYTES, True)),
    )


class _Transient(Exception):
    """A download attempt that may succeed when repeated."""


class _OverLimit(Exception):
    """A download past its deadline or its size cap: not retried."""


class _Refused(Exception):
    """A download the server refused for good (HTTP 4xx other than 408/425/429)."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"HTTP {status} {reason}".strip() if status else reason)
        self.status, self.reason = status, reason


def _download_once(url: str, part: Path, timeout: float, deadline: float, max_bytes: int) -> None:
    """One attempt: fill ``part`` with ``url``'s bytes, resuming from what ``part`` already holds.

    ``deadline`` (``time.monotonic()``) and ``max_bytes`` bound the whole file: :class:`_OverLimit`. The
    exchange is the one bounded reader's (:func:`lmms_eval_plugins.bounded_http.fetch`)."""
    import time
    from http import HTTPStatus

    from lmms_eval_plugins import bounded_http
    from lmms_eval_plugins.safe_files import UnsafePathError, open_append

    lib = bounded_http.http_library()
    have = part.stat().st_size if part.is_file() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    state: dict[str, Any] = {"size": have, "total": None, "out": None}

    def on_headers(status: int, answer: Mapping[str, str]) -> None:
        content_range = answer.get("content-range", "")
        resumed = bool(have) and status == 206 and content_range.startswith(f"bytes {have}-")
        if status == 206 and not resumed:  # a part we did not ask for: start over
            part.unlink(missing_ok=True)
            raise _Transient(f"the server answered the range {content_range!r}, not bytes {have}-")
        if "/" in content_range and content_range.rsplit("/", 1)[1].isdigit():
            state["total"] = int(content_range.rsplit("/", 1)[1])
        elif (length := answer.get("content-length", "")).isdigit():
            state["total"] = int(length) + (have if resumed else 0)
        if state["total"] is not None and state["total"] > max_bytes:
            raise _OverLimit(f"the server announces {state['total']:,} bytes, above the cap of {max_bytes:,}")
        if not resumed:
            part.unlink(missing_ok=True)
            state["size"] = 0
        state["out"] = open_append(part, binary=True)

    class Sink:  # the part file, opened once the headers say whether the answer resumes it
        def write(self, chunk: bytes) -> int:
            state["size"] += len(chunk)
            if state["size"] > max_bytes:
                raise _OverLimit(f"the body goes past the cap of {max_bytes:,} bytes")
            return state["out"].write(chunk)

    try:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise bounded_http.DeadlinePassed(0, have)
        status, _, _ = bounded_http.fetch(
            url,
            headers=headers,
            max_bytes=max_bytes,
            deadline=remaining,
            timeout=timeout,
            sink=Sink(),
            on_headers=on_headers,
        )  # type: ignore[arg-type]
    except bounded_http.BodyTooLarge as exc:  # only when the server ignored our range: the whole file is too large
        raise _OverLimit(
            f"the server announces {exc.size:,} bytes, above the cap of {max_bytes:,}"
            if exc.announced
            else f"the body goes past the cap of {max_bytes:,} bytes"
        ) from exc
    except bounded_http.DeadlinePassed as exc:
        raise _OverLimit(f"not complete within the deadline ({state['size']:,} bytes received)") from exc
    except UnsafePathError as exc:  # a link planted at the part file: never written through
        raise _Refused(0, str(exc)) from exc
    except (lib.InvalidURL, lib.UnsupportedProtocol, lib.TooManyRedirects, ValueError) as exc:
        raise _Refused(0, str(exc)) from exc
    except lib.TimeoutException as exc:
        raise _Transient(f"no answer within {timeout:g}s") from exc
    except (lib.HTTPError, OSError) as exc:  # connection reset or refused, a body cut short, a malformed answer
        raise _Transient(f"{type(exc).__name__}: {exc}") from exc
    finally:
        if state["out"] is not None:
            state["out"].close()
    if not 200 <= status < 300:
        reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
        if status == 416 and have:  # what we hold no longer fits the file: start over
            part.unlink(missing_ok=True)
            raise _Transient("HTTP 416 on resume")
        if status in _RETRY_STATUS:
            raise _Transient(f"HTTP {status} {reason}".strip())
        raise _Refused(status, reason)
    size, total = part.stat().st_size if part.is_file() else 0, state["total"]
    if total is not None and size != total:  # a body cut short without an error
        raise _Transient(f"the connection closed after {size} of {total} bytes")


def fetch_url(
    url: str,
    dest: Path,
    *,
    record: str,
    timeout: float | None = None,
    retries: int | None = None,
    limits: tuple[float, int] | None = None,
) -> Path:
    """Download ``url`` to ``dest`` once (atomic rename); later calls reuse the file.

    ``timeout`` and ``retries`` default to :func:`download_settings`. A timeout, a dropped connection or
    HTTP 408/425/429/5xx is retried after a short pause, resuming from the bytes already received where
    the server honours ``Range``; another HTTP error (404, 401, 403...) fails at once. ``limits``
    (:func:`download_limits`): all attempts end by the deadline, and a body past the size cap is refused
    at once (``Content-Length`` or the bytes received), a trickle and an endless body alike. Failures are a
    :class:`MediaError` naming the URL, the record, where the file was to go, and the fix.
    """
    import time

    if dest.is_file():
        return dest
    if timeout is None or retries is None:
        default_timeout, default_retries = download_settings()
        timeout = default_timeout if timeout is None else timeout
        retries = default_retries if retries is None else retries
    skip = f"or set {SKIP_MISSING_MEDIA_ENV}=1 to leave such records out (they are counted as skipped)"
    by_hand = f"put a copy of the file at {dest}, use a local copy of the data via {DATA_ROOT_ENV}, {skip}"
    if hub_offline():  # the user asked for no network: an uncached file is missing, not fetched
        raise MediaError(
            f"{url} is not in the download cache, and HF_HUB_OFFLINE=1 forbids downloading it",
            record=record,
            path=str(dest),
            fix=f"run once with network access (HF_HUB_OFFLINE unset) to fill the cache, or {by_hand}",
        )
    seconds, max_bytes = limits or download_limits()
    deadline = time.monotonic() + seconds
    dest.parent.mkdir(parents=True, exist_ok=True)
    # a private, new part file (never through a link): the download resumes into it, then moves into place
    part = dest.parent / f".{dest.name}.{secrets.token_hex(8)}.part"
    if not write_new(part, b"", mode=0o600):
        raise MediaError(
            f"{part} appeared while the download of {url} was starting",
            record=record,
            path=str(dest),
            fix="run again (another process is downloading the same file)",
        )
    problems: list[str] = []
    try:
        for attempt in range(retries + 1):
            if attempt:
                time.sleep(max(0.0, min(0.25 * 2**attempt, 4.0, deadline - time.monotonic())))
            try:
                if time.monotonic() > deadline:
                    raise _OverLimit("not complete within the deadline")
                _download_once(url, part, timeout, deadline, max_bytes)
            except _Transient as exc:
                problems.append(str(exc))
                continue
            except _OverLimit as exc:
                raise MediaError(
                    f"could not download {url}: {exc} (deadline {seconds:g}s, cap {max_bytes:,} bytes)",
                    record=record,
                    path=str(dest),
                    fix=f"for a slow server or a genuine large file raise {DOWNLOAD_DEADLINE_ENV} or "
                    f"{DOWNLOAD_MAX_BYTES_ENV}; or {by_hand}",
                ) from exc
            except _Refused as exc:
                what = {
                    404: "not found: the file is gone from that address",
                    410: "gone",
                    401: "the server asks for credentials",
                    403: "forbidden",
                }.get(exc.status, exc.reason)
                raise MediaError(
                    f"could not download {url}: HTTP {exc.status} ({what})"
                    if exc.status
                    else f"could not download {url}: {exc.reason}",
                    record=record,
                    path=str(dest),
                    fix=by_hand,
                ) from exc
            move_into_place(part, dest)
            return dest
    finally:
        part.unlink(missing_ok=True)
    raise MediaError(
        f"could not download {url} in {retries + 1} attempt(s): {'; '.join(problems[-3:])}",
        record=record,
        path=str(dest),
        fix=f"check the network; for a slow server raise {DOWNLOAD_TIMEOUT_ENV} (now {timeout:g}s) "
        f"or {DOWNLOAD_RETRIES_ENV} (now {retries}); or {by_hand}",
    )


def fetch_all(jobs: Sequence[tuple[str, Path, str]], workers: int = 16) -> list[Path | MediaError]:
    """Download (url, dest, record) jobs concurrently; failures come back as MediaError values."""
    timeout, retries = download_settings()  # a bad setting stops the run once, before any download
    limits = download_limits()

    def one(job: tuple[str, Path, str]) -> Path | MediaError:
        try:
            return fetch_url(job[0], job[1], record=job[2], timeout=timeout, retries=retries, limits=limits)
        except MediaError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
        return list(pool.map(one, jobs))


def read_csv_records(path: Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            return [dict(row) for row in csv.DictReader(handle)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(
            f"cannot read CSV: {exc}", path=str(path), fix="check the file is a UTF-8 CSV with a header row"
        ) from exc


# Bounds of every JSON this package reads (results, logged samples, data files): Python's parser recurses
# once per level (a RecursionError deep down) and refuses integers past sys.get_int_max_str_digits().
MAX_JSON_DEPTH = 100
MAX_JSON_INT_DIGITS = 308  # a longer integer fits no float: float() of it would crash a reader later
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class JsonLimitError(ValueError):
    """JSON beyond the reader's bounds: nested deeper than :data:`MAX_JSON_DEPTH`, or an integer with more
    digits than Python converts. The message says which; callers add the file and the line."""


def json_depth_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether brackets outside strings nest deeper than ``limit`` (a linear scan, no recursion)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_JSON_INT_DIGITS:
        if len(digits.lstrip("-")) > sys.get_int_max_str_digits():
            raise JsonLimitError(f"an integer of more than {sys.get_int_max_str_digits()} digits")
        raise JsonLimitError(f"an integer of more than {MAX_JSON_INT_DIGITS} digits (larger than any float)")
    return int(digits)


def parse_json(text: str) -> Any:
    """``json.loads`` within bounds: a :class:`JsonLimitError` for deep nesting or an over-long integer,
    ``json.JSONDecodeError`` for bad syntax. The one JSON parser for files read from disk."""
    if json_depth_exceeds(text):
        raise JsonLimitError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        return json.loads(text, parse_int=_bounded_int)
    except (json.JSONDecodeError, JsonLimitError):
        raise
    except RecursionError:
        raise JsonLimitError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep") from None
    except ValueError:  # only the int digit limit raises a plain ValueError here
        raise JsonLimitError(f"an integer of more than {sys.get_int_max_str_digits()} digits") from None


def read_json(path: Path) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise DataError("file not found", path=str(path), fix="check the data folder layout") from exc
    except UnicodeDecodeError as exc:
        raise DataError(
            f"not UTF-8 text: byte {exc.object[exc.start]:#04x} at offset {exc.start}",
            path=str(path),
            fix="re-save the file as UTF-8 (JSON files must be UTF-8)",
        ) from exc
    except OSError as exc:
        raise DataError(f"cannot read: {exc}", path=str(path), fix="check the file exists and is readable") from exc
    try:
        return parse_json(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON: {exc}", path=str(path), fix="fix the JSON syntax") from exc
    except JsonLimitError as exc:
        raise DataError(f"{exc}", path=str(path), fix=JSON_LIMIT_FIX) from exc


JSON_LIMIT_FIX = (
    f"no real file of this kind nests more than {MAX_JSON_DEPTH} levels or holds such an integer: "
    "the file is damaged or hostile; restore it from its source"
)


class JsonlLineError(DataError):
    """One line of a JSON Lines file is not a JSON object: ``line`` is its number (from 1) and
    ``json_error`` the parser's message when the line is not JSON at all (None: JSON, not an object)."""

    def __init__(self, problem: str, *, line: int, json_error: str | None, path: str, fix: str):
        super().__init__(problem, path=path, fix=fix)
        self.line = line
        self.json_error = json_error


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a UTF-8 JSON Lines file, in order.

    The one JSONL reader of the package (records, hints, logged samples, human labels). Lines end at
    ``\\n`` only (a ``\\r`` before it is JSON whitespace): not at the other separators
    ``str.splitlines`` knows (U+0085, U+2028, U+2029...), which JSON written with ``ensure_ascii=False``
    (lmms-eval's logged samples) leaves raw inside strings. The file is streamed, a line at a time, so
    memory holds one line, never the file. A file that cannot be opened is a :class:`DataError` when
    iteration starts; a line that cannot be read or is not UTF-8 is one when iteration reaches it; a bad
    line is a :class:`JsonlLineError` (a :class:`DataError` whose ``problem`` starts with ``line N:``)
    raised when iteration reaches it, after the lines before it were yielded. A torn last line is a bad line.
    """
    try:
        handle = open(path, "rb")  # binary: lines split at b"\n" only
    except OSError as exc:
        raise DataError(f"cannot read: {exc}", path=str(path), fix="check the file exists and is UTF-8 text") from exc
    with handle:
        for number, line in _lines(handle, path):
            if not line.strip():
                continue
            yield number, _jsonl_record(line, number, path)


def _lines(handle: Any, path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of the UTF-8 lines of an open binary file, without their ``\n``."""
    number = 0
    while True:
        try:
            raw = handle.readline()
        except OSError as exc:
            raise DataError(
                f"cannot read: {exc}", path=str(path), fix="check the file exists and is UTF-8 text"
            ) from exc
        if not raw:
            return
        number += 1
        try:
            yield number, (raw[:-1] if raw.endswith(b"\n") else raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(
                f"cannot read: line {number} is not UTF-8 ({exc.reason} at byte {exc.start})",
                path=str(path),
                fix="check the file is UTF-8 text",
            ) from exc


def _jsonl_record(line: str, number: int, path: Path) -> dict[str, Any]:
    """One JSONL line's object, or a :class:`JsonlLineError` naming the line."""
    try:
        record = parse_json(line)
    except json.JSONDecodeError as exc:
        raise JsonlLineError(
            f"line {number}: invalid JSON ({exc.msg})",
            line=number,
            json_error=exc.msg,
            path=str(path),
            fix="one JSON object per line",
        ) from exc
    except JsonLimitError as exc:
        raise JsonlLineError(
            f"line {number}: {exc}", line=number, json_error=str(exc), path=str(path), fix=JSON_LIMIT_FIX
        ) from exc
    if not isinstance(record, dict):
        raise JsonlLineError(
            f"line {number}: not a JSON object",
            line=number,
            json_error=None,
            path=str(path),
            fix="one JSON object per line",
        )
    return record


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every object of a JSON Lines file, in order (blank lines skipped); errors as :func:`iter_jsonl`."""
    return [record for _, record in iter_jsonl(path)]


def require_fields(record: dict[str, Any], fields: Iterable[str], *, record_id: str, path: Path) -> None:
    missing = [name for name in fields if name not in record or record[name] is None]
    if missing:
        raise DataError(
            f"missing field(s) {', '.join(missing)}",
            record=record_id,
            path=str(path),
            fix="add the field(s); see the task README for the record schema",
        )


def skipped_stamp_feature() -> Any:
    """The one Arrow type of the skipped-records stamp (:func:`stamp_skipped`), also when it is ``[]``."""
    import datasets

    return datasets.List({"reason": datasets.Value("string"), "count": datasets.Value("int64")})


def to_dataset(docs: list[dict[str, Any]], features: Mapping[str, Any] | None = None):
    """Docs -> ``datasets.Dataset`` (lmms-eval holds a task's docs as one). Nested values travel as Arrow
    lists and structs. ``features`` (column -> ``datasets`` feature) types the columns inference cannot
    (an empty list, a field null in every doc): all of them, or some, the others inferred as
    ``Dataset.from_list`` would. The skipped-records stamp always has its one type.

    The Arrow table is built a column at a time (one ``pyarrow.array`` each): ``Dataset.from_list`` with
    features encodes row by row, 8-20x the cost of the table itself (issue 40, ``bench/bench_process_docs.py``)."""
    import datasets
    import pyarrow as pa

    fixed = dict(features or {})
    if docs and SKIPPED_FIELD in docs[0]:
        fixed.setdefault(SKIPPED_FIELD, skipped_stamp_feature())
    if not docs:
        if not fixed:
            return datasets.Dataset.from_list(docs)
        # from_list([]) has no columns, which the features then refuse
        return datasets.Dataset.from_dict({name: [] for name in fixed}, features=datasets.Features(fixed))
    names = list(docs[0])
    fixed_types = datasets.Features({name: fixed[name] for name in names if name in fixed}).type
    arrays = []
    for name in names:
        column = [doc.get(name) for doc in docs]
        if name in fixed:
            arrays.append(pa.array(column, type=fixed_types[name].type))
        else:
            arrays.append(pa.array(column))
    table = pa.Table.from_arrays(arrays, names=names)
    inferred = datasets.Features.from_arrow_schema(table.schema)
    ordered = datasets.Features({name: fixed[name] if name in fixed else inferred[name] for name in names})
    return datasets.Dataset(table.cast(ordered.arrow_schema), info=datasets.DatasetInfo(features=ordered))
