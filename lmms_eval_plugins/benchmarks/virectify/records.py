"""ViRectify records: validating the records of virectify.jsonl, their videos and the task options, and
the typed record one doc carries (:class:`Record`, with its :class:`Gold` or :class:`Hint`), built once by
the loader (tasks.py ``process_docs*``) and read back by prompts and scoring through :func:`record_of`.

A doc travels through lmms-eval as a row of a Hugging Face dataset, so :meth:`Record.columns` writes
Arrow-native values (lists, and the gold as lists of structs), never JSON text."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from lmms_eval_plugins.benchmarks.virectify.replies import (
    _text,
    graph_edges,
    label_value,
    step_number,
)
from lmms_eval_plugins.data import (
    DataSource,
    keep_records_with_media,
    read_jsonl,
    require_fields,
    require_file,
    safe_path,
)
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.media import intervals_past_end, video_info
from lmms_eval_plugins.parsing import parse_intervals

BENCHMARK = "virectify"
JSONL_NAME = "virectify.jsonl"
LOCAL_LAYOUT = (
    f"virectify/{JSONL_NAME} (one JSON record per line: id, video, domain, error_type, solution_source, question, "
    "answer, solution, error_identify, error_graph, timestamps, rationale; see the virectify task README) plus the "
    "videos under virectify/videos/ (the 'video' paths are relative to virectify/)"
)

DEFAULT_NUM_FRAMES = 32
DEFAULT_MAX_LONG_SIDE = 448
VISUAL_MODES = ("interleaved", "video")
HINT_KINDS = ("error_identify", "rationale")  # the feedback a virectify_reflect doc shows

# Data keys -> the names the paper prints (Table 2 columns, Figure 4 labels).
DOMAINS = {
    "dynamic_perception": "Dynamic Perception",
    "scientific_reasoning": "Scientific Reasoning",
    "embodied_decision": "Embodied Decision",
}
DOMAIN_ALIASES = {
    "situated_decision_making": "embodied_decision",
    "situated_decision": "embodied_decision",
    "embodied_decision_making": "embodied_decision",
}
ERROR_TYPES = {
    "logical": "Logical",
    "visual_perception": "Visual Perception",
    "question_misunderstanding": "Question Misunderstanding",
    "hallucination": "Hallucination",
}
ERROR_TYPE_ALIASES = {
    "logic": "logical",
    "reasoning": "logical",
    "perception": "visual_perception",
    "misunderstanding": "question_misunderstanding",
}
REQUIRED_FIELDS = (
    "id",
    "video",
    "domain",
    "error_type",
    "question",
    "answer",
    "solution",
    "error_identify",
    "error_graph",
    "timestamps",
    "rationale",
)


# ----------------------------------------------------------------------------------------------- records


def _key(value: Any, known: Mapping[str, str], aliases: Mapping[str, str]) -> str | None:
    norm = re.sub(r"[\s\-]+", "_", _text(value).strip().lower())
    norm = norm.removesuffix("_error")
    for key, name in known.items():
        if norm in (key, name.lower().replace(" ", "_")):
            return key
    return aliases.get(norm)


def _gold_intervals(raw: Any) -> list[tuple[float, float]] | None:
    if isinstance(raw, str):
        return parse_intervals(raw) or None
    if not isinstance(raw, list) or not raw:
        return None
    out = []
    for item in raw:
        if (
            not isinstance(item, (list, tuple))
            or len(item) != 2
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in item)
            or item[0] > item[1]
            or item[0] < 0
        ):
            return None
        out.append((float(item[0]), float(item[1])))
    return out


def _solution_steps(raw: Any) -> list[str] | None:
    if isinstance(raw, str):
        raw = [line for line in raw.splitlines() if line.strip()]
    if not isinstance(raw, list) or not raw or not all(isinstance(s, str) and s.strip() for s in raw):
        return None
    steps = []
    for k, step in enumerate(raw, start=1):
        step = step.strip()
        steps.append(step if re.match(r"step\s*\d+", step, re.IGNORECASE) else f"Step {k}: {step}")
    return steps


def normalize_record(raw: Any, *, line: int, path: Path) -> dict[str, Any]:
    """Validate one record of virectify.jsonl (schema in BENCHMARKS.md and the README)."""
    record_id = _text(raw.get("id")).strip() if isinstance(raw, Mapping) else ""
    record_id = record_id or f"line {line}"
    require_fields(raw, REQUIRED_FIELDS, record_id=record_id, path=path)

    def bad(problem: str, fix: str) -> DataError:
        return DataError(problem, record=record_id, path=str(path), fix=fix)

    domain = _key(raw["domain"], DOMAINS, DOMAIN_ALIASES)
    if domain is None:
        raise bad(f"domain {raw['domain']!r} is none of {', '.join(DOMAINS)}", "use one of the three domain keys")
    error_type = _key(raw["error_type"], ERROR_TYPES, ERROR_TYPE_ALIASES)
    if error_type is None:
        raise bad(
            f"error_type {raw['error_type']!r} is none of {', '.join(ERROR_TYPES)}", "use one of the four error types"
        )
    solution = _solution_steps(raw["solution"])
    if solution is None:
        raise bad("solution must be a non-empty list of step strings", 'give ["Step 1: ...", "Step 2: ..."]')
    if not isinstance(raw["error_identify"], Mapping) or not raw["error_identify"]:
        raise bad("error_identify must be a non-empty object", 'give {"step1": ["1", ""], "step2": ["0", "why"]}')
    labels: dict[int, str] = {}
    for key, value in raw["error_identify"].items():
        step, label = step_number(key), label_value(value)
        if step is None or label is None or not 1 <= step <= len(solution):
            raise bad(
                f"error_identify entry {key!r}: {value!r} is not a step of the solution with a '0'/'1' label",
                f'keys are "step1".."step{len(solution)}", values ["1", ""] or ["0", "explanation"]',
            )
        labels[step] = label
    if not isinstance(raw["error_graph"], Mapping):
        raise bad("error_graph must be an object", 'give {"step2": ["step2"], "step3": ["step2"]}')
    edges = graph_edges(raw["error_graph"])
    outside = sorted({step for edge in edges for step in edge if not 1 <= step <= len(solution)})
    if outside:
        raise bad(
            f"error_graph names step(s) {', '.join(map(str, outside))}, but the solution has {len(solution)} step(s)",
            f'refer only to "step1".."step{len(solution)}"',
        )
    intervals = _gold_intervals(raw["timestamps"])
    if intervals is None:
        raise bad(
            f"timestamps {raw['timestamps']!r} is not a non-empty list of [start, end] seconds",
            "give [[12.0, 20.0], [31.0, 35.0]] (start <= end, seconds)",
        )
    for name in ("question", "answer", "rationale"):
        if not isinstance(raw[name], str) or not raw[name].strip():
            raise bad(f"{name} is empty or not a string", f"fill in the {name}")
    return {
        "id": record_id,
        "video": raw["video"],
        "domain": domain,
        "error_type": error_type,
        "solution_source": _text(raw.get("solution_source")).strip() or "(unknown)",
        "source": _text(raw.get("source")).strip(),
        "question": raw["question"].strip(),
        "answer": raw["answer"].strip(),
        "solution": solution,
        "error_identify": dict(raw["error_identify"]),
        "error_graph": dict(raw["error_graph"]),
        "labels": labels,
        "edges": edges,
        "intervals": intervals,
        "rationale": raw["rationale"].strip(),
    }


def load_records(source: DataSource) -> list[dict[str, Any]]:
    assert source.root is not None  # no hub copy exists (resolve_source says so)
    path = source.root / JSONL_NAME
    if not path.is_file():
        raise DataError("the ViRectify records file is missing", path=str(path), fix=f"use this layout: {LOCAL_LAYOUT}")
    records = [normalize_record(raw, line=i + 1, path=path) for i, raw in enumerate(read_jsonl(path))]
    if not records:
        raise DataError("the ViRectify records file holds no record", path=str(path), fix="one JSON record per line")
    seen: set[str] = set()
    for record in records:
        if record["id"] in seen:
            raise DataError("duplicate id", record=record["id"], path=str(path), fix="give every record its own id")
        seen.add(record["id"])

    def check(record: dict[str, Any]) -> None:
        video = safe_path(source.root, record["video"], record=record["id"], field="video")
        require_file(
            video,
            record=record["id"],
            what="video",
            fix=f"put the video there (layout: {LOCAL_LAYOUT}), or set "
            "LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA=1 to skip such records",
        )
        record["video_path"] = str(video)
        duration = video_info(video, record["id"]).duration  # a corrupt video is a (skippable) MediaError
        late = [record["intervals"][i] for i in intervals_past_end(record["intervals"], duration)]
        if late:
            raise DataError(
                f"timestamps {late} lie past the end of the video ({duration:.2f} s)",
                record=record["id"],
                path=str(path),
                fix=f"correct the key-time intervals, or the 'video' file ({video})",
            )

    return keep_records_with_media(BENCHMARK, records, check)


def _options(spec: Mapping[str, Any]) -> dict[str, Any]:
    num_frames = int(spec.get("num_frames", DEFAULT_NUM_FRAMES))
    side = spec.get("max_long_side", DEFAULT_MAX_LONG_SIDE)
    mode = spec.get("visual_mode", "interleaved")
    if num_frames < 1 or mode not in VISUAL_MODES:
        raise DataError(
            f"bad task options num_frames={num_frames!r}, visual_mode={mode!r}",
            fix=f"num_frames >= 1 and visual_mode one of {', '.join(VISUAL_MODES)}",
        )
    return {"num_frames": num_frames, "max_long_side": int(side) if side else 0, "visual_mode": mode}


class Gold(NamedTuple):
    """The annotation a reply is scored against: the gold step labels, error-graph edges and key times."""

    labels: dict[int, str]
    edges: set[tuple[int, int]]
    intervals: list[tuple[float, float]]


# The doc columns that carry the gold annotation to scoring, as Arrow-native lists of structs (a doc is a
# row of a Hugging Face dataset): written by gold_columns, read by gold_of, typed by gold_features.
def gold_features() -> dict[str, Any]:
    """The Arrow types of the gold columns: fixed, as an error graph may have no edge in any record."""
    from datasets import List, Value

    return {
        "gold_labels": List({"step": Value("int64"), "label": Value("string")}),
        "gold_edges": List({"source": Value("int64"), "target": Value("int64")}),
        "gold_timestamps": List({"start": Value("float64"), "end": Value("float64")}),
    }


def gold_columns(record: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """A record's gold annotation as the doc columns that carry it to scoring (:func:`gold_of` reads them)."""
    return {
        "gold_labels": [{"step": int(k), "label": str(v)} for k, v in sorted(record["labels"].items())],
        "gold_edges": [{"source": int(s), "target": int(t)} for s, t in sorted(record["edges"])],
        "gold_timestamps": [{"start": float(a), "end": float(b)} for a, b in record["intervals"]],
    }


def gold_of(doc: Mapping[str, Any]) -> Gold:
    """The typed gold annotation of a doc (:func:`gold_columns` wrote it); the whole doc's reader is
    :func:`record_of`. A KeyError, TypeError or ValueError when the columns are garbled."""
    labels = {int(x["step"]): x["label"] for x in doc["gold_labels"]}
    if any(label not in ("0", "1") for label in labels.values()):
        raise ValueError(f"gold_labels holds a label other than '0' or '1': {sorted(set(labels.values()), key=str)}")
    return Gold(
        labels=labels,
        edges={(int(x["source"]), int(x["target"])) for x in doc["gold_edges"]},
        intervals=[(float(x["start"]), float(x["end"])) for x in doc["gold_timestamps"]],
    )


# ----------------------------------------------------------------------------------------------- the typed doc


@dataclass(frozen=True)
class Hint:
    """The feedback a ``virectify_reflect`` doc shows (hints.py renders it)."""

    kind: str  # one of HINT_KINDS
    text: str  # as the prompt shows it
    source: str  # "gold", or the hints file it was read from


@dataclass(frozen=True)
class Record:
    """One ViRectify doc: a record of virectify.jsonl as a request sees it, with the task's frame options.
    A ``virectify`` doc carries the ``gold`` a reply is scored against, a ``virectify_reflect`` doc the
    ``hint`` it shows instead: exactly one of the two."""

    record_id: str  # the column "id"
    video_path: str  # resolved inside the data root
    source_video: str  # the record's 'video' as written: the cluster unit of error bars
    domain: str  # a key of DOMAINS
    error_type: str  # a key of ERROR_TYPES
    solution_source: str
    source: str  # "" when the record names none
    question: str
    answer: str  # the reference answer (the judge's)
    solution: tuple[str, ...]  # "Step k: ..." lines
    num_frames: int
    max_long_side: int  # 0: no resizing
    visual_mode: str  # one of VISUAL_MODES
    gold: Gold | None = None
    hint: Hint | None = None

    def __post_init__(self) -> None:
        if (self.gold is None) == (self.hint is None):
            raise ValueError("a ViRectify doc carries either the gold (virectify) or a hint (virectify_reflect)")

    @classmethod
    def of(cls, record: Mapping[str, Any], options: Mapping[str, Any], *, hint: Hint | None = None) -> Record:
        """From a loaded record (:func:`normalize_record` with its ``video_path``) and the task options
        (``_options``): with its gold, or with ``hint`` for the reflection task."""
        gold = (
            None if hint is not None else Gold(dict(record["labels"]), set(record["edges"]), list(record["intervals"]))
        )
        return cls(
            record_id=record["id"],
            video_path=record["video_path"],
            source_video=record["video"],
            domain=record["domain"],
            error_type=record["error_type"],
            solution_source=record["solution_source"],
            source=record["source"],
            question=record["question"],
            answer=record["answer"],
            solution=tuple(record["solution"]),
            num_frames=options["num_frames"],
            max_long_side=options["max_long_side"],
            visual_mode=options["visual_mode"],
            gold=gold,
            hint=hint,
        )

    def columns(self) -> dict[str, Any]:
        """The doc's columns, in this order (Arrow-native values): the record's, then the gold's or the hint's."""
        out: dict[str, Any] = {
            "id": self.record_id,
            "video_path": self.video_path,
            "source_video": self.source_video,
            "domain": self.domain,
            "error_type": self.error_type,
            "solution_source": self.solution_source,
            "source": self.source,
            "question": self.question,
            "answer": self.answer,
            "solution": list(self.solution),
            "num_frames": self.num_frames,
            "max_long_side": self.max_long_side,
            "visual_mode": self.visual_mode,
        }
        if self.gold is not None:
            out.update(gold_columns(self.gold._asdict()))
        if self.hint is not None:
            out.update({"hint_kind": self.hint.kind, "hint": self.hint.text, "hint_source": self.hint.source})
        return out

    def required_gold(self) -> Gold:
        """The gold; a DataError naming the record for a reflection doc (it has none)."""
        if self.gold is None:
            raise DataError(
                "a virectify_reflect doc reached the scoring of virectify (it carries a hint, no gold)",
                record=self.record_id,
                fix="score it with process_results_reflect",
            )
        return self.gold

    def required_hint(self) -> Hint:
        """The hint; a DataError naming the record for a ``virectify`` doc (it has none)."""
        if self.hint is None:
            raise DataError(
                "a virectify doc reached the scoring of virectify_reflect (it carries the gold, no hint)",
                record=self.record_id,
                fix="score it with process_results",
            )
        return self.hint


def _text_field(doc: Mapping[str, Any], name: str, allowed: Mapping[str, Any] | tuple[str, ...] | None = None) -> str:
    value = doc[name]
    if not isinstance(value, str):
        raise TypeError(f"{name} is {type(value).__name__}, not text")
    if allowed is not None and value not in allowed:
        raise ValueError(f"{name} {value!r} is none of {', '.join(allowed)}")
    return value


def _count(doc: Mapping[str, Any], name: str, least: int) -> int:
    value = doc[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} {value!r} is not a whole number >= {least}")
    return value


def record_of(doc: Mapping[str, Any]) -> Record:
    """The typed record a doc carries (what :meth:`Record.columns` wrote, as lmms-eval hands it back); a
    DataError naming the record when a field is missing or garbled."""
    try:
        solution = doc["solution"]
        if not isinstance(solution, (list, tuple)) or not all(isinstance(step, str) for step in solution):
            raise TypeError("solution is not a list of step texts")
        hint = None
        if "hint_kind" in doc:
            hint = Hint(
                kind=_text_field(doc, "hint_kind", HINT_KINDS),
                text=_text_field(doc, "hint"),
                source=_text_field(doc, "hint_source"),
            )
        elif "gold_labels" not in doc:
            raise KeyError("gold_labels (a virectify doc) or hint_kind (a virectify_reflect doc)")
        return Record(
            record_id=_text_field(doc, "id"),
            video_path=_text_field(doc, "video_path"),
            source_video=_text_field(doc, "source_video"),
            domain=_text_field(doc, "domain", DOMAINS),
            error_type=_text_field(doc, "error_type", ERROR_TYPES),
            solution_source=_text_field(doc, "solution_source"),
            source=_text_field(doc, "source"),
            question=_text_field(doc, "question"),
            answer=_text_field(doc, "answer"),
            solution=tuple(solution),
            num_frames=_count(doc, "num_frames", 1),
            max_long_side=_count(doc, "max_long_side", 0),
            visual_mode=_text_field(doc, "visual_mode", VISUAL_MODES),
            gold=gold_of(doc) if hint is None else None,
            hint=hint,
        )
    except KeyError as exc:
        key = exc.args[0] if exc.args else "?"
        problem = (
            f"a ViRectify doc lacks the field {key!r}" if str(key).isidentifier() else f"a ViRectify doc lacks {key}"
        )
        cause: Exception = exc
    except (TypeError, ValueError) as exc:
        problem, cause = f"a ViRectify doc garbles a field ({exc})", exc
    record_id = doc.get("id") if isinstance(doc, Mapping) else None
    raise DataError(
        problem,
        record=str(record_id) if record_id else "?",
        fix="build docs with virectify's process_docs / process_docs_reflect (Record.columns)",
    ) from cause
