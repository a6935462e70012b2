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
import shutil
import tempfile
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence

from lmms_eval_plugins.errors import DataError, MediaError

DATA_ROOT_ENV = "LMMS_EVAL_PLUGINS_DATA_ROOT"
SKIP_MISSING_MEDIA_ENV = "LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA"
CACHE_ENV = "LMMS_EVAL_PLUGINS_CACHE"

SourceKind = Literal["sample", "local", "hub"]


@dataclass(frozen=True)
class DataSource:
    benchmark: str
    kind: SourceKind
    root: Path | None = None  # benchmark folder (sample/local) or the hub snapshot's local copy
    hub_repo: str | None = None

    def describe(self) -> str:
        return f"{self.benchmark} from the hub ({self.hub_repo})" if self.kind == "hub" else f"{self.benchmark} from {self.root}"


def source_spec(dataset: Any) -> dict[str, Any]:
    """Read the one-row source file that every task YAML loads (see module docstring)."""
    rows = list(dataset)
    if len(rows) != 1 or "benchmark" not in rows[0]:
        raise DataError("a task's source file must hold exactly one row with a 'benchmark' field",
                        fix="reinstall lmms-eval-plugins; the task folder is damaged")
    return dict(rows[0])


def resolve_source(benchmark: str, source: str, *, sample_dir: Path | None, hub_repo: str | None,
                   local_layout: str) -> DataSource:
    """Decide where ``benchmark`` is read from. ``local_layout`` is shown to users in errors."""
    if source == "sample":
        if sample_dir is None or not sample_dir.is_dir():
            raise DataError(f"the bundled sample of {benchmark} is missing", path=str(sample_dir or "(not set: load the task through its utils.py)"),
                            fix="reinstall lmms-eval-plugins (sample data ships inside the wheel)")
        return DataSource(benchmark, "sample", sample_dir)
    if source != "auto":
        raise DataError(f"unknown data source {source!r} for {benchmark}", fix="use 'auto' or 'sample'")
    data_root = os.environ.get(DATA_ROOT_ENV)
    if data_root:
        folder = Path(data_root).expanduser().resolve() / benchmark
        if not folder.is_dir():
            raise DataError(f"{DATA_ROOT_ENV} is set but holds no '{benchmark}' folder", path=str(folder),
                            fix=f"put the data in this layout: {local_layout}")
        return DataSource(benchmark, "local", folder)
    if hub_repo is None:
        raise DataError(
            f"the {benchmark} data is not public yet, so it cannot be downloaded",
            fix=f"set {DATA_ROOT_ENV}=/path/to/data with this layout: {local_layout} "
                f"(or run the bundled sample: --tasks {benchmark}_sample)")
    return DataSource(benchmark, "hub", None, hub_repo)


def safe_path(root: str | Path, value: Any, *, record: str | None, field: str = "path", name: bool = False,
              under: str = "", suffix: str = "", within: str | Path | None = None) -> Path:
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

    relative_fix = (f"write the record's {field} relative to the benchmark folder, with '/' separators, "
                    "and keep it inside that folder")
    if not isinstance(value, str):
        raise refuse("is not a string", relative_fix)
    if not value.strip():
        raise refuse("is empty", f"fill in the record's {field}")
    if "\0" in value:
        raise refuse("holds a NUL byte", f"remove the NUL byte from the record's {field}")
    if "\\" in value:
        raise refuse("holds a backslash; only '/' separates folders here", relative_fix)
    if PureWindowsPath(value).anchor or Path(value).is_absolute():
        raise refuse("is absolute, so it escapes the benchmark folder", relative_fix)
    if name and ("/" in value or ".." in value):
        raise refuse("is used as a file name, so it may hold no '/' and no '..'",
                     f"give the record a plain {field} (letters, digits, '_', '-', '.')")
    if ".." in value.split("/"):
        raise refuse("escapes the benchmark folder ('..')", relative_fix)
    container = Path(os.path.realpath(within if within is not None else root))
    real = Path(os.path.realpath(Path(root, under, value + suffix)))
    if not real.is_relative_to(container):
        raise refuse(f"escapes the benchmark folder: it resolves to {real}, outside {container} "
                     "(a symbolic link pointing out of the folder)",
                     "copy the file into the benchmark folder, or link it to a place inside that folder")
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


def find_with_extensions(root: Path, stem: str, extensions: Sequence[str], *, record: str | None,
                         field: str = "question_id", under: str = "", within: Path | None = None) -> Path | None:
    """The first existing ``root/under/<stem>.<ext>``; ``stem`` (an id from the data) goes through :func:`safe_path`."""
    for ext in extensions:
        path = safe_path(root, stem, record=record, field=field, name=True, under=under, suffix=f".{ext}", within=within)
        if path.is_file():
            return path
    return None


def require_unique(records: Sequence[Mapping[str, Any]], field: str, *, path: Path, where: Callable[[int], str]) -> None:
    """A ``DataError`` naming the first id used twice, both places (``where(index)``: "line 3") and the file."""
    first: dict[Any, int] = {}
    for index, record in enumerate(records):
        key = record.get(field)
        if key in first:
            raise DataError(f"{field} {key!r} is used twice ({where(first[key])} and {where(index)})", record=str(key),
                            path=str(path), fix=f"give every record its own {field}")
        first[key] = index


def skip_missing_media() -> bool:
    return os.environ.get(SKIP_MISSING_MEDIA_ENV, "") not in ("", "0", "false", "False")


# Records dropped because their media were missing, per benchmark (read back by aggregation, same process).
SKIPPED: dict[str, int] = {}


def keep_records_with_media(benchmark: str, records: Iterable[Any],
                            check: Callable[[Any], None]) -> list[Any]:
    """Run ``check`` (raises MediaError) on each record; skip failures only when the user asked to."""
    kept, skipped = [], 0
    for record in records:
        try:
            check(record)
        except MediaError:
            if not skip_missing_media():
                raise
            skipped += 1
            continue
        kept.append(record)
    SKIPPED[benchmark] = skipped
    if not kept:
        raise DataError(f"no {benchmark} record has its media", fix="check the data folder layout")
    return kept


def hub_file(repo_id: str, filename: str) -> Path:
    """A file of a hub dataset, through the Hugging Face cache (works with HF_HUB_OFFLINE=1 once cached)."""
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset"))
    except Exception as exc:  # network, auth, offline without cache: say what to do
        raise DataError(f"could not get {filename} from the hub dataset {repo_id}: {exc}",
                        fix=f"check the network (or HF_TOKEN), or download it once and set {DATA_ROOT_ENV}") from exc


def hub_snapshot(repo_id: str, allow_patterns: Sequence[str] | None = None) -> Path:
    """A local copy of (part of) a hub dataset repository, through the Hugging Face cache."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id=repo_id, repo_type="dataset", allow_patterns=list(allow_patterns or []) or None))
    except Exception as exc:
        raise DataError(f"could not get the hub dataset {repo_id}: {exc}",
                        fix=f"check the network (or HF_TOKEN), or download it once and set {DATA_ROOT_ENV}") from exc


def cache_dir(*parts: str) -> Path:
    base = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "lmms_eval_plugins")
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def fetch_url(url: str, dest: Path, *, record: str, timeout: float = 30.0) -> Path:
    """Download ``url`` to ``dest`` once (atomic rename); later calls reuse the file."""
    if dest.is_file():
        return dest
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, \
                tempfile.NamedTemporaryFile(dir=dest.parent, delete=False) as tmp:
            shutil.copyfileobj(response, tmp)
        os.replace(tmp.name, dest)
    except Exception as exc:
        raise MediaError(f"could not download {url}: {exc}", record=record, path=str(dest),
                         fix=f"put the file there by hand, or use a local copy of the data via {DATA_ROOT_ENV}") from exc
    return dest


def fetch_all(jobs: Sequence[tuple[str, Path, str]], workers: int = 16) -> list[Path | MediaError]:
    """Download (url, dest, record) jobs concurrently; failures come back as MediaError values."""
    def one(job: tuple[str, Path, str]) -> Path | MediaError:
        try:
            return fetch_url(job[0], job[1], record=job[2])
        except MediaError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, jobs))


def read_csv_records(path: Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            return [dict(row) for row in csv.DictReader(handle)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"cannot read CSV: {exc}", path=str(path), fix="check the file is a UTF-8 CSV with a header row") from exc


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError as exc:
        raise DataError("file not found", path=str(path), fix="check the data folder layout") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text: byte {exc.object[exc.start]:#04x} at offset {exc.start}", path=str(path),
                        fix="re-save the file as UTF-8 (JSON files must be UTF-8)") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"invalid JSON: {exc}", path=str(path), fix="fix the JSON syntax") from exc


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
    (lmms-eval's logged samples) leaves raw inside strings. The file is read when iteration starts: a
    file that cannot be read or is not UTF-8 is a :class:`DataError`; a bad line is a
    :class:`JsonlLineError` (a :class:`DataError` whose ``problem`` starts with ``line N:``) raised when
    iteration reaches it, after the lines before it were yielded. A torn last line is a bad line.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read: {exc}", path=str(path), fix="check the file exists and is UTF-8 text") from exc
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise JsonlLineError(f"line {number}: invalid JSON ({exc.msg})", line=number, json_error=exc.msg,
                                 path=str(path), fix="one JSON object per line") from exc
        if not isinstance(record, dict):
            raise JsonlLineError(f"line {number}: not a JSON object", line=number, json_error=None,
                                 path=str(path), fix="one JSON object per line")
        yield number, record


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every object of a JSON Lines file, in order (blank lines skipped); errors as :func:`iter_jsonl`."""
    return [record for _, record in iter_jsonl(path)]


def require_fields(record: dict[str, Any], fields: Iterable[str], *, record_id: str, path: Path) -> None:
    missing = [name for name in fields if name not in record or record[name] is None]
    if missing:
        raise DataError(f"missing field(s) {', '.join(missing)}", record=record_id, path=str(path),
                        fix="add the field(s); see the task README for the record schema")


def to_dataset(docs: list[dict[str, Any]]):
    """Docs -> ``datasets.Dataset``. Nested values should already be JSON strings or flat lists."""
    import datasets

    return datasets.Dataset.from_list(docs)
