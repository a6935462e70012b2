"""ViRectify reflection hints: where the hints come from (gold, a hints file, a logged run), and how a
hint is shown in the reflection prompt."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lmms_eval_plugins.benchmarks.virectify.prompts import format_intervals
from lmms_eval_plugins.benchmarks.virectify.records import Hint, _gold_intervals
from lmms_eval_plugins.benchmarks.virectify.replies import _text, redact_answer
from lmms_eval_plugins.benchmarks.virectify.spec import TEMPLATE
from lmms_eval_plugins.data import DataSource, read_jsonl, safe_path
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.logged_samples import read_samples
from lmms_eval_plugins.parsing import extract_tag, parse_intervals, strip_reasoning
from lmms_eval_plugins.safe_files import write_atomic

HINTS_ENV = "LMMS_EVAL_PLUGINS_VIRECTIFY_HINTS"


# ----------------------------------------------------------------------------------------------- reflection hints


def _hints_path(spec: Mapping[str, Any], source: DataSource) -> Path | None:
    env = os.environ.get(HINTS_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    if spec.get("hints_file"):
        assert source.root is not None
        return safe_path(source.root, str(spec["hints_file"]), record="source row", field="hints_file")
    return None


def _identify_text(value: Any) -> str:
    if isinstance(value, Mapping):
        return json.dumps(dict(value), ensure_ascii=False)
    text = _text(value).strip()
    inner = extract_tag(text, "error_identify")
    return inner if inner is not None else text


def render_hint(kind: str, error_identify: Any, rationale: Any, timestamps: Any) -> str:
    """The feedback shown in the reflection prompt. The rationale loses its final answer (``redact_answer``)."""
    if kind == "error_identify":
        return f"Error identification:\n{_identify_text(error_identify)}"
    lines = []
    if isinstance(timestamps, str) and timestamps.strip():
        intervals = parse_intervals(timestamps)
        lines.append(f"Key timestamps: {format_intervals(intervals) if intervals else timestamps.strip()}")
    elif isinstance(timestamps, list) and timestamps:
        intervals = _gold_intervals(timestamps)
        if intervals:
            lines.append(f"Key timestamps: {format_intervals(intervals)}")
    text = _text(rationale).strip()
    inner = extract_tag(text, "rationale")
    lines.append(f"Rationale: {redact_answer(inner if inner is not None else text)}")
    return "\n".join(lines)


def hint_of(kind: str, record: Mapping[str, Any], given: Mapping[str, Any] | None, path: Path | None) -> Hint:
    """The hint of ``kind`` a reflection doc of ``record`` (a loaded record) shows: rendered from the
    record's gold annotation, or from ``given``, its line of the hints file at ``path``."""
    if given is None:
        return Hint(kind, render_hint(kind, record["error_identify"], record["rationale"], record["intervals"]), "gold")
    return Hint(
        kind, render_hint(kind, given.get("error_identify"), given.get("rationale"), given.get("timestamps")), str(path)
    )


def load_hints(path: Path, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """id -> {error_identify, rationale, timestamps} from a hints JSONL; every record needs an entry."""
    if not path.is_file():
        raise DataError(
            "the reflection hints file is missing",
            path=str(path),
            fix=f'point {HINTS_ENV} at a JSONL of {{"id", "error_identify", "rationale"}} (see the README)',
        )
    hints: dict[str, dict[str, Any]] = {}
    for number, row in enumerate(read_jsonl(path), start=1):
        key = _text(row.get("id")).strip()
        if not key:
            raise DataError(f"line {number} has no id", path=str(path), fix="every line needs the record's id")
        hints[key] = row
    missing = [i for i in ids if i not in hints]
    if missing:
        raise DataError(
            f"{len(missing)} record(s) have no hint, e.g. {', '.join(missing[:5])}",
            path=str(path),
            fix="give one line per record (an empty string is a valid, empty hint)",
        )
    return hints


def _logged_text(row: Mapping[str, Any]) -> str:
    """The model output of one logged sample: ``resps`` when present, else ``filtered_resps`` (where
    lmms-eval 0.7.3 stores the JudgeFilter's ``{"text", "judge"}`` dict as a JSON string)."""
    for field in ("resps", "filtered_resps"):
        value = row.get(field)
        while isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str) and value.startswith("{"):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        if isinstance(value, Mapping):
            value = value.get("text")
        if isinstance(value, str):
            return value
    return ""


def _logged_id(row: Mapping[str, Any]) -> str | None:
    doc = row.get("doc")
    if isinstance(doc, Mapping) and doc.get("id"):
        return str(doc["id"])
    for metric in TEMPLATE:  # every metric item of a virectify sample carries the record id
        item = row.get(metric.name)
        if isinstance(item, Mapping) and item.get("id"):
            return str(item["id"])
    return None


def hints_from_samples(samples_path: str | Path, out_path: str | Path) -> int:
    """Write a hints JSONL from the logged samples of a ``virectify`` run (``--log_samples``): the
    ``<error_identify>``, ``<timestamps>`` and ``<rationale>`` of each model output become one line.
    Returns the number of lines written."""
    lines = []
    for row in read_samples(Path(samples_path)):
        record_id = _logged_id(row)
        if record_id is None:
            raise DataError(
                "a logged sample names no record id",
                path=str(samples_path),
                fix="use the samples file of a virectify run (lmms-eval --log_samples)",
            )
        body = strip_reasoning(_logged_text(row))
        lines.append(
            json.dumps(
                {
                    "id": record_id,
                    "error_identify": extract_tag(body, "error_identify") or "",
                    "timestamps": extract_tag(body, "timestamps") or "",
                    "rationale": extract_tag(body, "rationale") or "",
                },
                ensure_ascii=False,
            )
        )
    write_atomic(Path(out_path), "\n".join(lines) + "\n")
    return len(lines)
