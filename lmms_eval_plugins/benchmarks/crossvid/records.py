"""CrossVid records: each ``QA/<TASK>.json`` record validated into the row lmms-eval holds (Arrow-native
lists and structs, one schema per task: :func:`row_features`), its media paths resolved and checked,
MSR/MOC placeholders and boxes; and the typed record the hooks read from a row (:func:`record_of`)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from lmms_eval_plugins.data import read_json, require_fields, safe_path, skipped_stamp_feature
from lmms_eval_plugins.doc_fields import CHANCE_FIELD, ORACLE_FIELD
from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.outcome import SKIPPED_FIELD
from lmms_eval_plugins.parsing import parse_order

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOCAL_LAYOUT = (
    "crossvid/QA/<TASK>.json (one JSON list per task: BU, NC, CC, PEA, PI, FSA, PSS, MSR, MOC, CCQA), "
    "crossvid/videos/{assembly,behavior,cook,movie}/... (video paths in records are relative to videos/), "
    "crossvid/uav/frames/{1,2}/<vid>-{1,2}/<frames> and crossvid/uav/bbox/{1,2}/<vid>.json for MSR and MOC"
)
MISSING_FIX = (
    "put the file there (layout: " + LOCAL_LAYOUT + "); the Charades and Animal Kingdom videos of BU must be "
    "downloaded from their official sites into videos/behavior/. Or set LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA=1 "
    "to skip records whose media are missing (the count is reported as the 'skipped' metric)"
)


def _record_name(task: str, record_id: Any) -> str:
    return f"CrossVid {task} id {record_id}"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        a, b = _num(value[0]), _num(value[1])
        if a is not None and b is not None:
            return a, b
    return None


def interval_pieces(value: Any) -> list[tuple[float, float]] | None:
    """``[s, e]`` or ``[[s, e], [s, e], ...]`` (seconds) -> list of pieces; None if malformed."""
    single = _pair(value)
    if single is not None:
        return [single]
    if isinstance(value, (list, tuple)) and value:
        pieces = [_pair(v) for v in value]
        if all(p is not None for p in pieces):
            return pieces  # type: ignore[return-value]
    return None


_OPTION_LETTER = re.compile(r"^\s*[(\[]?([A-Z])\s*[.):：\]]")


def option_letters(options: Sequence[str]) -> str:
    """The letters the options carry ("A. ...", "(B) ..."); the first n letters when they carry none."""
    found = [m.group(1) if (m := _OPTION_LETTER.match(str(o))) else None for o in options]
    if all(found) and len(set(found)) == len(found):
        return "".join(found)  # type: ignore[arg-type]
    return LETTERS[: len(options)]


def _letters_of(answer: Any) -> list[str]:
    """BU's gold: ["A", "C"] or "AC" (also "A, C") -> ["A", "C"] in the written order."""
    if isinstance(answer, (list, tuple)):
        text = "".join(str(a) for a in answer)
    else:
        text = str(answer)
    return [ch for ch in text if ch.strip() and ch not in ",;/&+()[]{}."]


PLACEHOLDER = re.compile(r"\{([AB])(\d+)\}")


def resolve_placeholders(question: str, options: Sequence[str]) -> tuple[str, list[str], list[dict[str, Any]]]:
    """MSR/MOC: ``{A1}``..``{B5}`` -> ``obj_1``, ``obj_2``, ... named as the official script names them.

    The official script numbers the placeholders of the question in order, ``obj_<i>`` for the i-th
    occurrence, so a repeated placeholder keeps the number of its last occurrence ("{A1} .. {B1} ..
    {A1}" names A1 obj_3, B1 obj_2). It reads only the question (a placeholder only in an option
    crashes it: :func:`official_text_problem`); here those get the next numbers. Returns the
    question and options with names substituted and, per placeholder in order of first appearance,
    ``{"placeholder", "name", "view" ("A"|"B"), "ordinal" (1-based into the record's objects)}``.
    """
    in_question = [m.group(1) + m.group(2) for m in PLACEHOLDER.finditer(str(question))]
    numbers = {key: i for i, key in enumerate(in_question, start=1)}  # later occurrences overwrite
    following = len(in_question) + 1
    found: dict[str, dict[str, Any]] = {}
    for text in [question, *options]:
        for m in PLACEHOLDER.finditer(str(text)):
            key = m.group(1) + m.group(2)
            if key not in found:
                if key not in numbers:
                    numbers[key], following = following, following + 1
                found[key] = {
                    "placeholder": key,
                    "name": f"obj_{numbers[key]}",
                    "view": m.group(1),
                    "ordinal": int(m.group(2)),
                }

    def sub(text: str) -> str:
        return PLACEHOLDER.sub(lambda m: found[m.group(1) + m.group(2)]["name"], str(text))

    return sub(question), [sub(o) for o in options], list(found.values())


_BRACED = re.compile(r"\{(.*?)\}")


def official_text_problem(question: str, options: Sequence[str]) -> str | None:
    """Why the official MSR/MOC script crashes on this question text (and, after its retries, drops
    the record), or None: every ``{...}`` of the question must be a placeholder ``{A1}``..``{B5}``
    (its assert), and the question and every option must ``str.format`` with the question's names
    (a placeholder found only in an option is a KeyError there)."""
    fields = _BRACED.findall(str(question))
    for f in fields:
        if not re.fullmatch(r"[AB][1-5]", f):
            return f"the question's {{{f}}} is not a placeholder {{A1}}..{{B5}}"
    names = {f: "x" for f in fields}
    for where, text in [("the question", question), *((f"option {i + 1}", o) for i, o in enumerate(options))]:
        try:
            str(text).format(**names)
        except KeyError as exc:
            key = exc.args[0] if exc.args else "?"
            return f"placeholder {{{key}}} appears in {where} but not in the question"
        except (IndexError, ValueError, AttributeError) as exc:
            return f"{where} does not format ({type(exc).__name__}: {exc})"
    return None


def absent_objects(objects: Sequence[ObjectRef], positions: Mapping[str, Sequence[int]]) -> list[str]:
    """Names of the objects with no box at any sampled position of their view (the official script
    crashes on them: ``min()`` of no frames)."""
    return [ref.name for ref in objects if not any(ref.box_at(p) is not None for p in positions[ref.view])]


def _media(
    label: str, text: str, kind: str, rel: str, intervals: list | None = None, view: int | None = None
) -> dict[str, Any]:
    return {"label": label, "text": text, "kind": kind, "rel": rel, "intervals": intervals, "view": view}


def _require_str_list(record: Mapping[str, Any], field: str, n: int | None, where: str, path: Path) -> list[str]:
    value = record.get(field)
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, str) and v.strip() for v in value)
        or (n is not None and len(value) != n)
    ):
        size = f"{n} " if n is not None else ""
        raise DataError(
            f"field {field!r} must be a list of {size}non-empty strings, got {value!r}",
            record=where,
            path=str(path),
            fix="see the task README for the record schema",
        )
    return list(value)


def _require_str(record: Mapping[str, Any], field: str, where: str, path: Path) -> str:
    value = record.get(field)
    if not isinstance(value, str) or not value.strip():
        raise DataError(
            f"field {field!r} must be a non-empty string, got {value!r}",
            record=where,
            path=str(path),
            fix="see the task README for the record schema",
        )
    return value


def _gold_letter(answer: Any, letters: str, where: str, path: Path) -> str:
    text = str(answer).strip() if isinstance(answer, str) else ""
    if len(text) != 1 or text not in letters:
        raise DataError(
            f"answer {answer!r} is not one of the option letters {letters}",
            record=where,
            path=str(path),
            fix="the answer must be the letter of one option",
        )
    return text


def normalize_record(task: str, raw: Any, *, index: int, path: Path) -> dict[str, Any]:
    """Validate one record of ``QA/<task>.json`` and turn it into the row lmms-eval holds (:func:`row_features`).

    Media paths stay relative to the benchmark folder here (``rel``); :func:`attach_paths` resolves them.
    """
    if not isinstance(raw, dict):
        raise DataError(f"record {index} is not a JSON object", path=str(path), fix="QA files hold a list of objects")
    record_id = raw.get("id", f"#{index}")
    where = _record_name(task, record_id)
    required = {
        "BU": ("videos", "question", "options", "answer"),
        "NC": ("videos", "question", "options", "answer"),
        "CC": ("videos", "question", "options", "answer"),
        "PEA": ("videos", "begin", "end", "question", "options", "answer"),
        "PI": ("video", "beginning", "ending", "options", "answer"),
        "FSA": ("video A", "video B", "ref_segment", "answer"),
        "PSS": ("video", "segments", "answer"),
        "MSR": ("vid", "objects", "question", "options", "answer"),
        "MOC": ("vid", "objects", "question", "options", "answer"),
        "CCQA": ("video A", "video B", "question", "answer", "scoring_points"),
    }[task]
    require_fields(raw, ("id", *required), record_id=where, path=path)
    doc: dict[str, Any] = {
        "id": str(record_id),
        "task": task,
        "record": where,
        "fields": {},
        "gold": None,
        "letters": "",
        "options": [],
        "question": "",
        "answer_text": "",
        "scoring_points": [],
    }
    fields = doc["fields"]

    def video_rel(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise DataError(
                f"video path {value!r} is not a non-empty string",
                record=where,
                path=str(path),
                fix="video paths are relative to videos/, e.g. cook/xxx.mp4",
            )
        return "videos/" + value

    if task in ("BU", "NC", "CC", "PEA", "MSR", "MOC"):
        options = _require_str_list(raw, "options", None, where, path)
        doc["options"] = options
        doc["letters"] = option_letters(options)
        fields["QUESTION"] = _require_str(raw, "question", where, path)
        fields["OPTIONS"] = "\n".join(options)
    if task in ("BU", "NC", "CC", "PEA"):
        count = {"NC": 4, "CC": 4, "PEA": 3}.get(task)
        videos = _require_str_list(raw, "videos", count, where, path)
        intervals: list[Any] = [None] * len(videos)
        if task == "PEA":
            begin, end = raw["begin"], raw["end"]
            if not (
                isinstance(begin, list)
                and isinstance(end, list)
                and len(begin) == len(end) == len(videos)
                and all(_num(v) is not None for v in [*begin, *end])
            ):
                raise DataError(
                    "'begin' and 'end' must be lists of numbers (seconds), one per video",
                    record=where,
                    path=str(path),
                    fix="see the task README for the record schema",
                )
            # The official script truncates both ends to whole seconds (int()); so do we.
            intervals = [[[float(int(b)), float(int(e))]] for b, e in zip(begin, end)]
        doc["media"] = [
            _media(f"Video {k}", f"Video {k}:\n", "video", video_rel(v), iv)
            for k, (v, iv) in enumerate(zip(videos, intervals), start=1)
        ]
        if task == "BU":
            gold = _letters_of(raw["answer"])
            if not gold or any(ch not in doc["letters"] for ch in gold) or len(set(gold)) != len(gold):
                raise DataError(
                    f"answer {raw['answer']!r} is not a set of distinct option letters {doc['letters']}",
                    record=where,
                    path=str(path),
                    fix="BU answers are lists such as ['A', 'C'] or strings such as 'AC'",
                )
            # the official comparison: output == "".join(answer)
            doc["gold"] = {
                "letters": sorted(gold),
                "exact": "".join(str(a) for a in raw["answer"])
                if isinstance(raw["answer"], list)
                else str(raw["answer"]),
            }
        else:
            doc["gold"] = {"letter": _gold_letter(raw["answer"], doc["letters"], where, path), "exact": raw["answer"]}
    elif task == "PI":
        options = _require_str_list(raw, "options", None, where, path)
        doc["options"], doc["letters"] = options, option_letters(options)
        fields["OPTIONS"] = "\n".join(options)
        video = video_rel(raw["video"])
        groups = []
        for label, key in (("Beginning", "beginning"), ("Ending", "ending")):
            pieces = interval_pieces(raw[key])
            if pieces is None:
                raise DataError(
                    f"'{key}' must be [start, end] or a list of [start, end] (seconds), got {raw[key]!r}",
                    record=where,
                    path=str(path),
                    fix="see the task README for the record schema",
                )
            groups.append(_media(label, f"{label}:\n", "video", video, [list(p) for p in pieces]))
        doc["media"] = groups
        doc["gold"] = {"letter": _gold_letter(raw["answer"], doc["letters"], where, path), "exact": raw["answer"]}
    elif task == "FSA":
        ref, gold = _pair(raw["ref_segment"]), _pair(raw["answer"])
        if ref is None or gold is None:
            raise DataError(
                "'ref_segment' and 'answer' must be [start, end] in seconds",
                record=where,
                path=str(path),
                fix="see the task README for the record schema",
            )
        # printed as written ("5" or "5.0"): text, so Arrow does not make one number type of all records
        fields["BEGIN"], fields["END"] = str(raw["ref_segment"][0]), str(raw["ref_segment"][1])
        doc["media"] = [
            _media("Video 1", "Video 1:\n", "video", video_rel(raw["video A"])),
            _media("Video 2", "\nVideo 2:\n", "video", video_rel(raw["video B"])),
        ]
        doc["gold"] = {"interval": list(gold), "ref": list(ref)}
    elif task == "PSS":
        segments = raw["segments"]
        if not isinstance(segments, dict) or len(segments) < 2:
            raise DataError(
                "'segments' must be an object with at least two segments",
                record=where,
                path=str(path),
                fix="see the task README for the record schema",
            )
        video = video_rel(raw["video"])
        groups = []
        for k, value in enumerate(segments.values(), start=1):  # file order: the k-th entry is "Segment k"
            pieces = interval_pieces(value)
            if pieces is None:
                raise DataError(
                    f"segment {k} must be [start, end] or a list of them (seconds), got {value!r}",
                    record=where,
                    path=str(path),
                    fix="see the task README for the record schema",
                )
            groups.append(_media(f"Segment {k}", f"Segment {k}:\n", "video", video, [list(p) for p in pieces]))
        doc["media"] = groups
        fields["N"] = len(groups)
        order = parse_order(str(raw["answer"]), len(groups))
        if not order.ok:
            raise DataError(
                f"answer {raw['answer']!r} is not an order of the {len(groups)} segments ({order.error})",
                record=where,
                path=str(path),
                fix='write the order as "4->1->3->2"',
            )
        # exact: the answer the official comparison reads; None when it is not text (then nothing equals it)
        doc["gold"] = {"order": list(order.value), "exact": raw["answer"] if isinstance(raw["answer"], str) else None}
    elif task in ("MSR", "MOC"):
        vid = raw["vid"]
        if isinstance(vid, bool) or not isinstance(vid, (str, int)) or not str(vid).strip():
            raise DataError(
                f"'vid' must be a video id, got {vid!r}",
                record=where,
                path=str(path),
                fix="see the task README for the record schema",
            )
        objects = raw["objects"]
        if not isinstance(objects, list) or not all(isinstance(o, dict) and "id" in o for o in objects):
            raise DataError(
                "'objects' must be a list of {\"id\": track_id}",
                record=where,
                path=str(path),
                fix="see the task README for the record schema",
            )
        doc["official_problem"] = official_text_problem(fields["QUESTION"], doc["options"]) or ""
        question, options, refs = resolve_placeholders(fields["QUESTION"], doc["options"])
        for ref in refs:
            if not 1 <= ref["ordinal"] <= len(objects):
                raise DataError(
                    f"placeholder {{{ref['placeholder']}}} refers to object {ref['ordinal']}, but the record "
                    f"lists {len(objects)} object(s)",
                    record=where,
                    path=str(path),
                    fix="placeholders are {A1}..{B5}: view letter + 1-based position in 'objects'",
                )
            ref["track"] = objects[ref["ordinal"] - 1]["id"]
        fields["QUESTION"], fields["OPTIONS"] = question, "\n".join(options)
        doc["options"] = options  # as the model sees them, for matching a reply that repeats an option
        doc["objects"] = refs
        doc["media"] = [
            _media("View A", "View A:\n", "folder", f"uav/frames/1/{vid}-1", view=1),
            _media("View B", "\nView B:\n", "folder", f"uav/frames/2/{vid}-2", view=2),
        ]
        doc["bbox_rel"] = [
            {"view": "A", "path": f"uav/bbox/1/{vid}.json"},
            {"view": "B", "path": f"uav/bbox/2/{vid}.json"},
        ]
        doc["gold"] = {"letter": _gold_letter(raw["answer"], doc["letters"], where, path), "exact": raw["answer"]}
    elif task == "CCQA":
        fields["QUESTION"] = _require_str(raw, "question", where, path)
        doc["question"] = fields["QUESTION"]
        doc["answer_text"] = _require_str(raw, "answer", where, path)
        doc["scoring_points"] = _require_str_list(raw, "scoring_points", None, where, path)
        doc["media"] = [
            _media("Video A", "Video A:\n", "video", video_rel(raw["video A"])),
            _media("Video B", "\nVideo B:\n", "video", video_rel(raw["video B"])),
        ]
        del doc["gold"]  # CCQA's gold is its answer and scoring points (PointsGold)
    return doc


def attach_paths(doc: dict[str, Any], root: Path, within: Path | None = None) -> None:
    """Resolve the doc's relative media paths inside ``root`` (never outside it; symbolic links may point
    anywhere inside ``within``, default ``root``: a hub snapshot's files link into the hub cache's blobs).
    ``media_root`` keeps that folder: frame files are checked against it when a frame folder is read."""
    for media in doc["media"]:
        media["path"] = str(
            safe_path(root, media["rel"], record=doc["record"], field=f"path of {media['label']}", within=within)
        )
    if "bbox_rel" in doc:
        doc["bbox_path"] = [
            {
                "view": b["view"],
                "path": str(
                    safe_path(
                        root, b["path"], record=doc["record"], field=f"box file of view {b['view']}", within=within
                    )
                ),
            }
            for b in doc["bbox_rel"]
        ]
    doc["media_root"] = str(within if within is not None else root)


def check_media(doc: Mapping[str, Any]) -> None:
    """MediaError naming the record and the file for the first missing video, frame folder or box file."""
    for media in doc["media"]:
        path = Path(media["path"])
        exists = path.is_dir() if media["kind"] == "folder" else path.is_file()
        if not exists:
            what = "UAV frame folder" if media["kind"] == "folder" else "video"
            raise MediaError(
                f"{what} for {media['label']} not found", record=doc["record"], path=str(path), fix=MISSING_FIX
            )
    for box_file in doc.get("bbox_path") or []:
        if not Path(box_file["path"]).is_file():
            raise MediaError(
                f"bounding-box file of view {box_file['view']} not found",
                record=doc["record"],
                path=box_file["path"],
                fix=MISSING_FIX,
            )


_BOX_KEYS = ("xtl", "ytl", "xbr", "ybr")


def _box(value: Any, where: str, file: str) -> dict[str, float] | None:
    """One frame's box as the row holds it; a non-object entry (null) is no box, as the official script reads it."""
    if not isinstance(value, Mapping):
        return None
    try:
        return {k: float(value[k]) for k in _BOX_KEYS}
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(
            f"a box of {where} is not {{xtl, ytl, xbr, ybr}} numbers: {value!r}",
            path=file,
            fix="see the task README for the box file schema",
        ) from exc


def attach_boxes(docs: Sequence[dict[str, Any]]) -> None:
    """MSR/MOC: copy each referenced object's boxes from the view's box file, as a list of
    ``{"frame": position as written, "box"}`` (a dict keyed by frame would make Arrow union the
    keys of every record)."""
    cache: dict[str, dict[Any, Any]] = {}
    for doc in docs:
        files = {b["view"]: b["path"] for b in doc["bbox_path"]}
        for ref in doc["objects"]:
            file = files[ref["view"]]
            if file not in cache:
                tracks = read_json(Path(file))
                if not isinstance(tracks, list):
                    raise DataError(
                        'a box file must be a JSON list of {"id", "bbox"}',
                        path=file,
                        fix="see the task README for the box file schema",
                    )
                cache[file] = {t.get("id"): t.get("bbox") for t in tracks if isinstance(t, dict)}
            boxes = cache[file].get(ref["track"])
            if not isinstance(boxes, dict):
                raise DataError(
                    f"track {ref['track']!r} ({{{ref['placeholder']}}}) is not in the box file of view {ref['view']}",
                    record=doc["record"],
                    path=file,
                    fix="check the record's 'objects' ids against the box file",
                )
            where = f"track {ref['track']!r} ({{{ref['placeholder']}}}) of {doc['record']}"
            ref["boxes"] = [{"frame": str(k), "box": _box(v, where, file)} for k, v in boxes.items()]
            ref["track"] = str(ref["track"])  # an id: text, whether the record wrote 3 or "3"


# ----------------------------------------------------------------------------------------------- the typed record
# The loader builds each row above once; lmms-eval holds the rows in a Hugging Face dataset (Arrow
# lists and structs), and every hook reads a row through record_of: fields, never text to parse.


@dataclass(frozen=True)
class MediaGroup:
    """One labelled group of frames: a video, intervals of a video (PI, PEA, PSS) or a UAV view's frame folder."""

    label: str
    text: str  # the label as the prompt writes it before the frames
    kind: str  # "video" or "folder"
    rel: str  # relative to the benchmark folder
    path: str = ""
    intervals: tuple[tuple[float, float], ...] | None = None  # seconds; None: the whole video
    view: int | None = None


@dataclass(frozen=True)
class Box:
    xtl: float
    ytl: float
    xbr: float
    ybr: float


@dataclass(frozen=True)
class ObjectRef:
    """An MSR/MOC placeholder (``{A1}``) as the model reads it (``obj_1``), with its boxes per frame."""

    placeholder: str
    name: str
    view: str  # "A" or "B"
    ordinal: int
    track: str = ""
    boxes: tuple[tuple[str, Box | None], ...] = ()  # (frame position as the box file writes it, box)

    @cached_property
    def _by_frame(self) -> dict[str, Box | None]:
        return dict(self.boxes)

    def box_at(self, position: int) -> Box | None:
        """The box at a 0-based position of the view's sorted frame files, None where none is annotated."""
        return self._by_frame.get(str(position))


@dataclass(frozen=True)
class ChoiceGold:
    """NC, CC, PEA, PI, MSR, MOC: one option letter; ``exact`` is the answer the official comparison reads."""

    letter: str
    exact: str


@dataclass(frozen=True)
class LetterSetGold:
    """BU: the correct letters, sorted; ``exact`` is ``"".join(answer)``, the official comparison's string."""

    letters: tuple[str, ...]
    exact: str


@dataclass(frozen=True)
class IntervalGold:
    """FSA: the answer interval in Video 2 and the reference step in Video 1 (seconds)."""

    interval: tuple[float, float]
    ref: tuple[float, float] | None = None


@dataclass(frozen=True)
class OrderGold:
    """PSS: the segment order; ``exact`` the answer as written (None when it is not text: nothing equals it)."""

    order: tuple[int, ...]
    exact: str | None


@dataclass(frozen=True)
class PointsGold:
    """CCQA: the reference answer and the scoring points the rubric judge checks."""

    answer: str
    scoring_points: tuple[str, ...]


Gold = ChoiceGold | LetterSetGold | IntervalGold | OrderGold | PointsGold


@dataclass(frozen=True)
class CrossVidRecord:
    """One CrossVid question as every hook reads it."""

    id: str
    task: str
    record: str  # "CrossVid <TASK> id <id>": how errors name it
    gold: Gold
    media: tuple[MediaGroup, ...] = ()
    fields: tuple[tuple[str, Any], ...] = ()  # the prompt template's slots (QUESTION, OPTIONS, BEGIN, END, N)
    letters: str = ""
    options: tuple[str, ...] = ()
    question: str = ""
    objects: tuple[ObjectRef, ...] = ()
    media_root: str = ""
    budget: int = 0
    index_rule: str = "centre"  # a row without the option: the rule it was made with
    max_long_side: int = 0  # 0: frames keep their size
    strict: bool = False
    n_skipped: int = 0
    official_drop: str = ""
    n_official_dropped: int = 0


def _floats(value: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in value)


def media_group(row: Mapping[str, Any]) -> MediaGroup:
    intervals = row.get("intervals")
    return MediaGroup(
        label=str(row.get("label") or ""),
        text=str(row.get("text") or ""),
        kind=str(row.get("kind") or "video"),
        rel=str(row.get("rel") or ""),
        path=str(row.get("path") or ""),
        intervals=None if intervals is None else tuple((float(s), float(e)) for s, e in intervals),
        view=row.get("view"),
    )


def object_ref(row: Mapping[str, Any]) -> ObjectRef:
    boxes = tuple(
        (str(b["frame"]), None if b.get("box") is None else Box(**{k: float(b["box"][k]) for k in _BOX_KEYS}))
        for b in row.get("boxes") or []
    )
    return ObjectRef(
        placeholder=str(row["placeholder"]),
        name=str(row["name"]),
        view=str(row["view"]),
        ordinal=int(row["ordinal"]),
        track=str(row.get("track", "")),
        boxes=boxes,
    )


def _gold_of(row: Mapping[str, Any]) -> Gold:
    task, gold = row["task"], row.get("gold") or {}
    if task == "CCQA":
        return PointsGold(str(row.get("answer_text") or ""), tuple(row.get("scoring_points") or ()))
    if task == "BU":
        return LetterSetGold(tuple(gold["letters"]), gold["exact"])
    if task == "FSA":
        ref = gold.get("ref")
        return IntervalGold(_floats(gold["interval"]), None if ref is None else _floats(ref))  # type: ignore[arg-type]
    if task == "PSS":
        return OrderGold(tuple(int(k) for k in gold["order"]), gold.get("exact"))
    return ChoiceGold(gold["letter"], gold["exact"])


def record_of(doc: Mapping[str, Any] | CrossVidRecord) -> CrossVidRecord:
    """The typed record of a row as lmms-eval hands it to a hook (or as the loader built it)."""
    if isinstance(doc, CrossVidRecord):
        return doc
    return CrossVidRecord(
        id=str(doc.get("id", "")),
        task=doc["task"],
        record=str(doc.get("record") or ""),
        gold=_gold_of(doc),
        media=tuple(media_group(m) for m in doc.get("media") or ()),
        fields=tuple((doc.get("fields") or {}).items()),
        letters=str(doc.get("letters") or ""),
        options=tuple(doc.get("options") or ()),
        question=str(doc.get("question") or ""),
        objects=tuple(object_ref(o) for o in doc.get("objects") or ()),
        media_root=str(doc.get("media_root") or ""),
        budget=int(doc.get("budget") or 0),
        index_rule=str(doc.get("index_rule") or "centre"),
        max_long_side=int(doc.get("max_long_side") or 0),
        strict=bool(doc.get("strict")),
        n_skipped=int(doc.get("n_skipped") or 0),
        official_drop=str(doc.get("official_drop") or ""),
        n_official_dropped=int(doc.get("n_official_dropped") or 0),
    )


def row_features(task: str) -> Any:
    """The ``datasets.Features`` of one task's rows: one schema, declared, so Arrow never guesses a type
    from the data (an empty list, a null in every row, an int in one record and a float in the next)."""
    from datasets import Features, List, Value

    text, whole, number = Value("string"), Value("int64"), Value("float64")
    slots = {
        "BU": ("QUESTION", "OPTIONS"),
        "NC": ("QUESTION", "OPTIONS"),
        "CC": ("QUESTION", "OPTIONS"),
        "PEA": ("QUESTION", "OPTIONS"),
        "MSR": ("QUESTION", "OPTIONS"),
        "MOC": ("QUESTION", "OPTIONS"),
        "PI": ("OPTIONS",),
        "FSA": ("BEGIN", "END"),
        "PSS": ("N",),
        "CCQA": ("QUESTION",),
    }[task]
    features: dict[str, Any] = {
        "id": text,
        "task": text,
        "record": text,
        "fields": {slot: whole if slot == "N" else text for slot in slots},
        "letters": text,
        "options": List(text),
        "question": text,
        "answer_text": text,
        "scoring_points": List(text),
        "media": List(
            {
                "label": text,
                "text": text,
                "kind": text,
                "rel": text,
                "intervals": List(List(number)),
                "view": whole,
                "path": text,
            }
        ),
        "media_root": text,
        "budget": whole,
        "index_rule": text,
        "official_drop": text,
        "n_official_dropped": whole,
        "max_long_side": whole,
        "strict": Value("bool"),
        "n_skipped": whole,
        ORACLE_FIELD: text,
        CHANCE_FIELD: List(text),
        SKIPPED_FIELD: skipped_stamp_feature(),
    }
    if task == "BU":
        features["gold"] = {"letters": List(text), "exact": text}
    elif task == "FSA":
        features["gold"] = {"interval": List(number), "ref": List(number)}
    elif task == "PSS":
        features["gold"] = {"order": List(whole), "exact": text}
    elif task != "CCQA":
        features["gold"] = {"letter": text, "exact": text}
    if task in ("MSR", "MOC"):
        box = {k: number for k in _BOX_KEYS}
        features["official_problem"] = text
        features["objects"] = List(
            {
                "placeholder": text,
                "name": text,
                "view": text,
                "ordinal": whole,
                "track": text,
                "boxes": List({"frame": text, "box": box}),
            }
        )
        features["bbox_rel"] = features["bbox_path"] = List({"view": text, "path": text})
    return Features(features)
