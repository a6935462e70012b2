"""CrossVid: cross-video reasoning over groups of 2-4 videos (or two drone views), ten tasks.

Protocol (BENCHMARKS.md; the official scripts ``eval/<TASK>.py`` of ``chuntianli666/CrossVid``):
one user turn after the system prompt "You are a helpful video analyzer."; the task's prompt with
the frames of every video inserted at its "Input frames:" slot, each video's frames preceded by
its label; a total frame budget per question (128 by default) split equally over the videos, or by
interval length for PI and PSS; frames shrunk to 360 px on the longer side. Scoring: robust answer
extraction by default (``score``), the official exact-string comparison always reported next to it
(``score_strict``); FSA is the mean temporal IoU; CCQA is judged by the ``rubric`` judge.

Everything that decides a number (prompt text, frame budgets, placeholder and box resolution,
answer parsing, scores, averages) is a pure function below; the lmms-eval hooks are thin wrappers.
See the task README for every decision.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from lmms_eval_plugins.data import (
    DataSource,
    hub_snapshot,
    hub_store,
    keep_records_with_media,
    stamp_skipped,
    read_json,
    require_fields,
    require_unique,
    resolve_source,
    safe_path,
    source_spec,
    to_dataset,
)
from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.judges import JudgeItem, judged_mean, rubric_micro_average, rubric_per_question_mean
from lmms_eval_plugins.judges.filter import JudgeFilter, judged_parts  # noqa: F401  (JudgeFilter: used by the CCQA YAML)
from lmms_eval_plugins.media import (
    SampledFrames,
    VideoRequest,
    INDEX_RULES,
    folder_positions,
    frame_files,
    frame_plan,
    linspace_indices,
    sample_frame_folder,
    sample_video,
    sample_videos,
    split_budget,
    uniform_indices,  # noqa: F401  (index_rule "centre"; the tests read it from here)
    video_info,
)
from lmms_eval_plugins.messages import FrameGroup, flat_frames, frame_legend, interleaved_messages
from lmms_eval_plugins.metrics import interval_iou
from lmms_eval_plugins.outcome import agg_skipped, agg_skipped_by_reason, count_unscored, group_mean, guard_aggregations, with_unscored  # noqa: F401 (group_mean: the group YAMLs' null-safe mean)
from lmms_eval_plugins.parsing import parse_interval, parse_letter_set, parse_option_letter, parse_order
from lmms_eval_plugins.tasking import CHANCE_FIELD, ORACLE_FIELD, strict_requested

BENCHMARK = "crossvid"
HUB_REPO = "Chuntianli/CrossVid"
# The bundled sample data: set by the task folder's utils.py to the folder beside the YAMLs lmms-eval
# loaded (an installed or an exported task folder alike).
SAMPLE_DIR: Path | None = None
LOCAL_LAYOUT = (
    "crossvid/QA/<TASK>.json (one JSON list per task: BU, NC, CC, PEA, PI, FSA, PSS, MSR, MOC, CCQA), "
    "crossvid/videos/{assembly,behavior,cook,movie}/... (video paths in records are relative to videos/), "
    "crossvid/uav/frames/{1,2}/<vid>-{1,2}/<frames> and crossvid/uav/bbox/{1,2}/<vid>.json for MSR and MOC"
)
MISSING_FIX = ("put the file there (layout: " + LOCAL_LAYOUT + "); the Charades and Animal Kingdom videos of BU must be "
               "downloaded from their official sites into videos/behavior/. Or set LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA=1 "
               "to skip records whose media are missing (the count is reported as the 'skipped' metric)")

TASKS = ("BU", "NC", "CC", "PEA", "PI", "FSA", "PSS", "MSR", "MOC", "CCQA")
DIMENSIONS = {"C.Avg": ("BU", "NC", "CC", "PEA"), "T.Avg": ("PI", "FSA", "PSS"), "M.Avg": ("MSR", "MOC")}
PROPORTIONAL = frozenset({"PI", "PSS"})  # budget split by interval length; every other task splits equally
SYSTEM_PROMPT = "You are a helpful video analyzer."
DEFAULT_FRAMES = 128
DEFAULT_MAX_LONG_SIDE = 360
# Frame indices as the official scripts take them (np.linspace, first and last frame included);
# "centre" (bin centres, lmms_eval_plugins.media.uniform_indices) is kept behind the source option.
DEFAULT_INDEX_RULE = "linspace"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

# ----------------------------------------------------------------------------------------------- prompts
# Verbatim from the official scripts (chuntianli666/CrossVid, eval/<TASK>.py, the INFERENCE strings;
# the paper's Figures 18-23). "{FRAMES}" is where the labelled frames go.

_CHOICE_TAIL = "\n\nQuestion:\n{QUESTION}\n\nOptions:\n{OPTIONS}\n\nInput frames:\n{FRAMES}\n\nYour answer:\n"
_SINGLE = "Select one answer choice, and only output the capital letter of your choice."
_UAV = (
    "\nProvide you two synchronized UAV road recording videos, objects' positional information and a single-choice question.\n"
    "The positional information contains the bounding box coordinates ([xtl, ytl, xbr, ybr]) of the objects positioned in one appearing frame.\n"
    "Watch the videos first, then track the objects in both views and think about the question based on the information.\n"
    f"{_SINGLE}\n\nQuestion:\n{{QUESTION}}\n\nOptions:\n{{OPTIONS}}\n\nObjects information:\n{{BBOX}}\n\n"
    "Input frames:\n{FRAMES}\n\nYour answer:\n"
)
PROMPTS: dict[str, str] = {
    "BU": (
        "\nProvide you several videos and a multiple-choice question with 1-3 correct answer choices.\n"
        "Watch the videos carefully, and think about the question based on the information from the videos.\n"
        'Only output the capital letters of ALL your choices, e.g., "BCD".' + _CHOICE_TAIL
    ),
    "NC": (
        "\nProvide you four videos and a single-choice question with only one correct option.\n"
        "Watch the videos carefully, and think about the question based on the information from the four videos.\n"
        + _SINGLE + _CHOICE_TAIL
    ),
    "CC": (
        "\nProvide you four videos and a single-choice question with only one correct option.\n"
        "Watch the videos carefully, and think about the question based on the information from these videos.\n"
        + _SINGLE + _CHOICE_TAIL
    ),
    "PEA": (
        "\nProvide you three videos assembling the same toy car and a single-choice question.\n"
        "In addition, provide you four predefined error types that may assist you answer.\n"
        "- wrong order: this action is an ordering mistake.\n"
        "- previous one is mistake: this action is also an ordering mistake but is caused by the preceding ordering "
        "mistakes in the context.\n"
        "- shouldn't have happened: this action is unnecessary in the assembly.\n"
        "- wrong position: the two parts are not attached at their correct position.\n"
        "Watch the videos carefully, and think about the question based on the information from these videos.\n"
        + _SINGLE + _CHOICE_TAIL
    ),
    "PI": (
        "\nProvide you the beginning and the ending of a movie clip, what is most likely to happen in the middle?\n"
        "Watch the video segments carefully, and think about the question based on the context information.\n"
        + _SINGLE + "\n\nOptions:\n{OPTIONS}\n\nInput frames:\n{FRAMES}\n\nYour answer:\n"
    ),
    "FSA": (
        "\nProvide you two cooking videos, which step in Video 2 is functionally equivalent to the step shown between "
        "{BEGIN}s and {END}s in Video 1?\n"
        "Timestamps of frames sampled from Video 1 are: {TIME1}.\n"
        "Timestamps of frames sampled from Video 2 are: {TIME2}.\n"
        "Watch the two videos carefully, and think about the question based on the information of the two videos.\n"
        'Only output a time interval in seconds and separate the beginning and ending time with a comma, e.g., "15,23".'
        "\n\nInput frames:\n{FRAMES}\n\nYour answer:\n"
    ),
    "PSS": (
        "\nProvide you {N} shuffled segments of a cooking video, what's the correct order of these segments?\n"
        "Watch the segments carefully, and think about the question based on the relationship between these segments.\n"
        'Only output the correct segment number sequence separated by "->", e.g., "2->3->1->4".'
        "\n\nInput frames:\n{FRAMES}\n\nYour answer:\n"
    ),
    "MSR": _UAV,
    "MOC": _UAV,
    "CCQA": (
        "\nProvide you two cooking videos (Video A + Video B) and an open-ended question.\n"
        "Watch the videos carefully, and think about the question based on the information from both videos."
        "\n\nQuestion:\n{QUESTION}\n\nInput frames:\n{FRAMES}\n\nYour answer:\n"
    ),
}
FRAMES_SLOT = "{FRAMES}"
_FIELD = re.compile(r"\{(QUESTION|OPTIONS|BEGIN|END|TIME1|TIME2|N|BBOX)\}")


def fill(template: str, values: Mapping[str, Any]) -> str:
    """Replace ``{FIELD}`` slots in one pass, so braces inside the data are never expanded again."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]), template)


# ----------------------------------------------------------------------------------------------- averages

def _task_code(name: str) -> str:
    code = str(name).strip()
    code = code[len("crossvid_"):] if code.lower().startswith("crossvid_") else code
    code = code[: -len("_sample")] if code.lower().endswith("_sample") else code
    return code.upper()


def crossvid_averages(task_scores: Mapping[str, float]) -> dict[str, float]:
    """The paper's Table 2 averages from per-task scores (percent).

    Keys may be task codes ("BU") or task names ("crossvid_bu", "crossvid_bu_sample").
    C.Avg = mean(BU, NC, CC, PEA), T.Avg = mean(PI, FSA, PSS), M.Avg = mean(MSR, MOC),
    O.Avg = unweighted mean of the ten task scores (not of the dimension averages). An average
    with a task missing is NaN rather than a mean over fewer tasks.
    """
    scores = {_task_code(k): float(v) for k, v in task_scores.items()}

    def mean(codes: Sequence[str]) -> float:
        if any(c not in scores for c in codes):
            return float("nan")
        return sum(scores[c] for c in codes) / len(codes)

    out = {name: mean(codes) for name, codes in DIMENSIONS.items()}
    out["O.Avg"] = mean(TASKS)
    return out


# ----------------------------------------------------------------------------------------------- records

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
                found[key] = {"placeholder": key, "name": f"obj_{numbers[key]}", "view": m.group(1),
                              "ordinal": int(m.group(2))}

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


def absent_objects(objects: Sequence[Mapping[str, Any]], positions: Mapping[str, Sequence[int]]) -> list[str]:
    """Names of the objects with no box at any sampled position of their view (the official script
    crashes on them: ``min()`` of no frames)."""
    return [ref["name"] for ref in objects
            if not any(isinstance((ref.get("boxes") or {}).get(str(p)), Mapping) for p in positions[ref["view"]])]


def _media(label: str, text: str, kind: str, rel: str, intervals: list | None = None, view: int | None = None) -> dict[str, Any]:
    return {"label": label, "text": text, "kind": kind, "rel": rel, "intervals": intervals, "view": view}


def _require_str_list(record: Mapping[str, Any], field: str, n: int | None, where: str, path: Path) -> list[str]:
    value = record.get(field)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value) \
            or (n is not None and len(value) != n):
        size = f"{n} " if n is not None else ""
        raise DataError(f"field {field!r} must be a list of {size}non-empty strings, got {value!r}", record=where,
                        path=str(path), fix="see the task README for the record schema")
    return list(value)


def _require_str(record: Mapping[str, Any], field: str, where: str, path: Path) -> str:
    value = record.get(field)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"field {field!r} must be a non-empty string, got {value!r}", record=where, path=str(path),
                        fix="see the task README for the record schema")
    return value


def _gold_letter(answer: Any, letters: str, where: str, path: Path) -> str:
    text = str(answer).strip() if isinstance(answer, str) else ""
    if len(text) != 1 or text not in letters:
        raise DataError(f"answer {answer!r} is not one of the option letters {letters}", record=where, path=str(path),
                        fix="the answer must be the letter of one option")
    return text


def normalize_record(task: str, raw: Any, *, index: int, path: Path) -> dict[str, Any]:
    """Validate one record of ``QA/<task>.json`` and turn it into the task-independent doc form.

    Media paths stay relative to the benchmark folder here (``rel``); :func:`attach_paths` resolves them.
    """
    if not isinstance(raw, dict):
        raise DataError(f"record {index} is not a JSON object", path=str(path), fix="QA files hold a list of objects")
    record_id = raw.get("id", f"#{index}")
    where = _record_name(task, record_id)
    required = {
        "BU": ("videos", "question", "options", "answer"), "NC": ("videos", "question", "options", "answer"),
        "CC": ("videos", "question", "options", "answer"),
        "PEA": ("videos", "begin", "end", "question", "options", "answer"),
        "PI": ("video", "beginning", "ending", "options", "answer"),
        "FSA": ("video A", "video B", "ref_segment", "answer"), "PSS": ("video", "segments", "answer"),
        "MSR": ("vid", "objects", "question", "options", "answer"), "MOC": ("vid", "objects", "question", "options", "answer"),
        "CCQA": ("video A", "video B", "question", "answer", "scoring_points"),
    }[task]
    require_fields(raw, ("id", *required), record_id=where, path=path)
    doc: dict[str, Any] = {"id": str(record_id), "task": task, "record": where, "fields": {}, "gold": None,
                           "letters": "", "options": [], "question": "", "answer_text": "", "scoring_points": []}
    fields = doc["fields"]

    def video_rel(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise DataError(f"video path {value!r} is not a non-empty string", record=where, path=str(path),
                            fix="video paths are relative to videos/, e.g. cook/xxx.mp4")
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
            if not (isinstance(begin, list) and isinstance(end, list) and len(begin) == len(end) == len(videos)
                    and all(_num(v) is not None for v in [*begin, *end])):
                raise DataError("'begin' and 'end' must be lists of numbers (seconds), one per video", record=where,
                                path=str(path), fix="see the task README for the record schema")
            # The official script truncates both ends to whole seconds (int()); so do we.
            intervals = [[[float(int(b)), float(int(e))]] for b, e in zip(begin, end)]
        doc["media"] = [_media(f"Video {k}", f"Video {k}:\n", "video", video_rel(v), iv)
                        for k, (v, iv) in enumerate(zip(videos, intervals), start=1)]
        if task == "BU":
            gold = _letters_of(raw["answer"])
            if not gold or any(ch not in doc["letters"] for ch in gold) or len(set(gold)) != len(gold):
                raise DataError(f"answer {raw['answer']!r} is not a set of distinct option letters {doc['letters']}",
                                record=where, path=str(path), fix="BU answers are lists such as ['A', 'C'] or strings such as 'AC'")
            # the official comparison: output == "".join(answer)
            doc["gold"] = {"letters": sorted(gold), "exact": "".join(str(a) for a in raw["answer"]) if isinstance(raw["answer"], list) else str(raw["answer"])}
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
                raise DataError(f"'{key}' must be [start, end] or a list of [start, end] (seconds), got {raw[key]!r}",
                                record=where, path=str(path), fix="see the task README for the record schema")
            groups.append(_media(label, f"{label}:\n", "video", video, [list(p) for p in pieces]))
        doc["media"] = groups
        doc["gold"] = {"letter": _gold_letter(raw["answer"], doc["letters"], where, path), "exact": raw["answer"]}
    elif task == "FSA":
        ref, gold = _pair(raw["ref_segment"]), _pair(raw["answer"])
        if ref is None or gold is None:
            raise DataError("'ref_segment' and 'answer' must be [start, end] in seconds", record=where, path=str(path),
                            fix="see the task README for the record schema")
        fields["BEGIN"], fields["END"] = raw["ref_segment"][0], raw["ref_segment"][1]  # printed as written
        doc["media"] = [_media("Video 1", "Video 1:\n", "video", video_rel(raw["video A"])),
                        _media("Video 2", "\nVideo 2:\n", "video", video_rel(raw["video B"]))]
        doc["gold"] = {"interval": list(gold), "ref": list(ref)}
    elif task == "PSS":
        segments = raw["segments"]
        if not isinstance(segments, dict) or len(segments) < 2:
            raise DataError("'segments' must be an object with at least two segments", record=where, path=str(path),
                            fix="see the task README for the record schema")
        video = video_rel(raw["video"])
        groups = []
        for k, value in enumerate(segments.values(), start=1):  # file order: the k-th entry is "Segment k"
            pieces = interval_pieces(value)
            if pieces is None:
                raise DataError(f"segment {k} must be [start, end] or a list of them (seconds), got {value!r}",
                                record=where, path=str(path), fix="see the task README for the record schema")
            groups.append(_media(f"Segment {k}", f"Segment {k}:\n", "video", video, [list(p) for p in pieces]))
        doc["media"] = groups
        fields["N"] = len(groups)
        order = parse_order(str(raw["answer"]), len(groups))
        if not order.ok:
            raise DataError(f"answer {raw['answer']!r} is not an order of the {len(groups)} segments ({order.error})",
                            record=where, path=str(path), fix='write the order as "4->1->3->2"')
        doc["gold"] = {"order": list(order.value), "exact": raw["answer"]}
    elif task in ("MSR", "MOC"):
        vid = raw["vid"]
        if isinstance(vid, bool) or not isinstance(vid, (str, int)) or not str(vid).strip():
            raise DataError(f"'vid' must be a video id, got {vid!r}", record=where, path=str(path),
                            fix="see the task README for the record schema")
        objects = raw["objects"]
        if not isinstance(objects, list) or not all(isinstance(o, dict) and "id" in o for o in objects):
            raise DataError("'objects' must be a list of {\"id\": track_id}", record=where, path=str(path),
                            fix="see the task README for the record schema")
        doc["official_problem"] = official_text_problem(fields["QUESTION"], doc["options"]) or ""
        question, options, refs = resolve_placeholders(fields["QUESTION"], doc["options"])
        for ref in refs:
            if not 1 <= ref["ordinal"] <= len(objects):
                raise DataError(f"placeholder {{{ref['placeholder']}}} refers to object {ref['ordinal']}, but the record "
                                f"lists {len(objects)} object(s)", record=where, path=str(path),
                                fix="placeholders are {A1}..{B5}: view letter + 1-based position in 'objects'")
            ref["track"] = objects[ref["ordinal"] - 1]["id"]
        fields["QUESTION"], fields["OPTIONS"] = question, "\n".join(options)
        doc["options"] = options  # as the model sees them, for matching a reply that repeats an option
        doc["objects"] = refs
        doc["media"] = [_media("View A", "View A:\n", "folder", f"uav/frames/1/{vid}-1", view=1),
                        _media("View B", "\nView B:\n", "folder", f"uav/frames/2/{vid}-2", view=2)]
        doc["bbox_rel"] = {"A": f"uav/bbox/1/{vid}.json", "B": f"uav/bbox/2/{vid}.json"}
        doc["gold"] = {"letter": _gold_letter(raw["answer"], doc["letters"], where, path), "exact": raw["answer"]}
    elif task == "CCQA":
        fields["QUESTION"] = _require_str(raw, "question", where, path)
        doc["question"] = fields["QUESTION"]
        doc["answer_text"] = _require_str(raw, "answer", where, path)
        doc["scoring_points"] = _require_str_list(raw, "scoring_points", None, where, path)
        doc["media"] = [_media("Video A", "Video A:\n", "video", video_rel(raw["video A"])),
                        _media("Video B", "\nVideo B:\n", "video", video_rel(raw["video B"]))]
    return doc


def attach_paths(doc: dict[str, Any], root: Path, within: Path | None = None) -> None:
    """Resolve the doc's relative media paths inside ``root`` (never outside it; symbolic links may point
    anywhere inside ``within``, default ``root``: a hub snapshot's files link into the hub cache's blobs).
    ``media_root`` keeps that folder: frame files are checked against it when a frame folder is read."""
    for media in doc["media"]:
        media["path"] = str(safe_path(root, media["rel"], record=doc["record"], field=f"path of {media['label']}",
                                      within=within))
    if "bbox_rel" in doc:
        doc["bbox_path"] = {v: str(safe_path(root, rel, record=doc["record"], field=f"box file of view {v}", within=within))
                            for v, rel in doc["bbox_rel"].items()}
    doc["media_root"] = str(within if within is not None else root)


def check_media(doc: Mapping[str, Any]) -> None:
    """MediaError naming the record and the file for the first missing video, frame folder or box file."""
    for media in doc["media"]:
        path = Path(media["path"])
        exists = path.is_dir() if media["kind"] == "folder" else path.is_file()
        if not exists:
            what = "UAV frame folder" if media["kind"] == "folder" else "video"
            raise MediaError(f"{what} for {media['label']} not found", record=doc["record"], path=str(path), fix=MISSING_FIX)
    for view, file in (doc.get("bbox_path") or {}).items():
        if not Path(file).is_file():
            raise MediaError(f"bounding-box file of view {view} not found", record=doc["record"], path=file, fix=MISSING_FIX)


def attach_boxes(docs: Sequence[dict[str, Any]]) -> None:
    """MSR/MOC: copy each referenced object's boxes (frame position -> box) from the view's box file."""
    cache: dict[str, dict[Any, Any]] = {}
    for doc in docs:
        for ref in doc["objects"]:
            file = doc["bbox_path"][ref["view"]]
            if file not in cache:
                tracks = read_json(Path(file))
                if not isinstance(tracks, list):
                    raise DataError("a box file must be a JSON list of {\"id\", \"bbox\"}", path=file,
                                    fix="see the task README for the box file schema")
                cache[file] = {t.get("id"): t.get("bbox") for t in tracks if isinstance(t, dict)}
            boxes = cache[file].get(ref["track"])
            if not isinstance(boxes, dict):
                raise DataError(f"track {ref['track']!r} ({{{ref['placeholder']}}}) is not in the box file of view {ref['view']}",
                                record=doc["record"], path=file, fix="check the record's 'objects' ids against the box file")
            ref["boxes"] = boxes


# ----------------------------------------------------------------------------------------------- oracle / chance

def _interval_reply(interval: Sequence[float]) -> str:
    return ",".join(f"{float(x):g}" for x in interval)


def oracle_reply(doc: Mapping[str, Any]) -> str:
    """The reply a perfect model gives, in the exact form the prompt asks for (passes strict too)."""
    task, gold = doc["task"], doc["gold"]
    if task == "BU":
        return gold["exact"]
    if task == "FSA":
        return _interval_reply(gold["interval"])
    if task == "PSS":
        return gold["exact"]
    if task == "CCQA":
        # the standard answer followed by every scoring point: full marks from a faithful judge
        return "\n".join([doc["answer_text"], *doc["scoring_points"]])
    return gold["exact"]


def chance_replies(doc: Mapping[str, Any]) -> list[str]:
    """What the ``random`` model picks from: every option (letter tasks), every set of 1-3 letters
    (BU), orders (PSS: all when n <= 5, else 120 seeded permutations), the reference segment's own
    timestamps (FSA: a same-time baseline; a uniform interval would need the video length), none (CCQA)."""
    task = doc["task"]
    if task == "BU":
        letters = doc["letters"]
        return ["".join(c) for r in (1, 2, 3) for c in itertools.combinations(letters, r)]
    if task == "PSS":
        n = len(doc["media"])
        if n <= 5:
            return ["->".join(map(str, p)) for p in itertools.permutations(range(1, n + 1))]
        rng = random.Random(int.from_bytes(hashlib.sha256(doc["record"].encode()).digest()[:8], "big"))
        seen: dict[str, None] = {}
        while len(seen) < 120:
            order = list(range(1, n + 1))
            rng.shuffle(order)
            seen.setdefault("->".join(map(str, order)), None)
        return list(seen)
    if task == "FSA":
        return [_interval_reply(doc["gold"]["ref"])]
    if task == "CCQA":
        return []
    return list(doc["letters"])


# ----------------------------------------------------------------------------------------------- loading

def _options(spec: Mapping[str, Any]) -> dict[str, Any]:
    frames = spec.get("frames", DEFAULT_FRAMES)
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise DataError(f"'frames' in the crossvid source file must be a positive integer, got {frames!r}",
                        fix="set the total frame budget per question, e.g. 128")
    side = spec.get("max_long_side", DEFAULT_MAX_LONG_SIDE)
    if side is not None and (isinstance(side, bool) or not isinstance(side, int) or side < 1):
        raise DataError(f"'max_long_side' must be a positive integer or null, got {side!r}", fix="e.g. 360")
    strict = spec.get("strict", False)
    if not isinstance(strict, bool):
        raise DataError(f"'strict' must be true or false, got {strict!r}", fix="strict: true reproduces the official exact-string scoring")
    rule = spec.get("index_rule", DEFAULT_INDEX_RULE)
    if rule not in INDEX_RULES:
        raise DataError(f"'index_rule' must be one of {', '.join(INDEX_RULES)}, got {rule!r}",
                        fix="linspace: the official frame indices (default); centre: bin centres")
    return {"frames": frames, "max_long_side": side, "strict": strict or strict_requested(), "index_rule": rule}


def qa_path(root: Path, task: str) -> Path:
    return root / "QA" / f"{task}.json"


def read_qa(root: Path, task: str) -> tuple[list[Any], Path]:
    path = qa_path(root, task)
    if not path.is_file():
        raise DataError(f"the CrossVid {task} questions are missing", path=str(path), fix=f"use this layout: {LOCAL_LAYOUT}")
    raw = read_json(path)
    if not isinstance(raw, list) or not raw:
        raise DataError(f"QA/{task}.json must be a non-empty JSON list", path=str(path), fix=f"use this layout: {LOCAL_LAYOUT}")
    return raw, path


def hub_patterns(docs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The hub files a task's docs need (``allow_patterns`` for ``snapshot_download``)."""
    patterns: dict[str, None] = {}
    for doc in docs:
        for media in doc["media"]:
            patterns.setdefault(media["rel"] + ("/*" if media["kind"] == "folder" else ""), None)
        for rel in (doc.get("bbox_rel") or {}).values():
            patterns.setdefault(rel, None)
    return list(patterns)


def _source_root(source: DataSource, task: str) -> tuple[Path, list[dict[str, Any]]]:
    if source.kind == "hub":
        assert source.hub_repo is not None
        root = hub_snapshot(source.hub_repo, [f"QA/{task}.json"])
        raw, path = read_qa(root, task)
        docs = [normalize_record(task, r, index=i, path=path) for i, r in enumerate(raw)]
        require_unique(docs, "id", path=path, where=lambda i: f"record {i}")
        root = hub_snapshot(source.hub_repo, [f"QA/{task}.json", *hub_patterns(docs)])
        return root, docs
    assert source.root is not None
    raw, path = read_qa(source.root, task)
    docs = [normalize_record(task, r, index=i, path=path) for i, r in enumerate(raw)]
    require_unique(docs, "id", path=path, where=lambda i: f"record {i}")
    return source.root, docs


def load_docs(spec: Mapping[str, Any], task: str) -> list[dict[str, Any]]:
    """Every doc of one task: validated, media resolved and checked, options and gold attached."""
    options = _options(spec)
    source = resolve_source(BENCHMARK, spec.get("source", "auto"), sample_dir=SAMPLE_DIR, hub_repo=HUB_REPO,
                            local_layout=LOCAL_LAYOUT)
    root, docs = _source_root(source, task)
    within = hub_store(root) if source.kind == "hub" else None
    for doc in docs:
        attach_paths(doc, root, within)
    key = f"{BENCHMARK}_{task.lower()}"
    docs = keep_records_with_media(key, docs, check_media)
    if task in ("MSR", "MOC"):
        attach_boxes(docs)
    skipped = sum(docs.skipped.values())
    kept = docs
    docs = official_inclusion(kept, task, options)
    for doc in docs:
        # budget: set by official_inclusion
        doc.update(max_long_side=options["max_long_side"] or 0, strict=options["strict"], n_skipped=skipped)
        doc[ORACLE_FIELD] = oracle_reply(doc)
        doc[CHANCE_FIELD] = chance_replies(doc)
    stamp_skipped(docs, kept)
    return docs


def official_inclusion(docs: Sequence[dict[str, Any]], task: str, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Marks each doc with ``official_drop`` (why the official script drops it, "" if it keeps it) and
    ``n_official_dropped`` (how many of the task it drops); strict mode leaves those docs out, as there."""
    listed: dict[tuple[str, str | None], int] = {}
    for doc in docs:
        doc.update(budget=options["frames"], index_rule=options["index_rule"])
        doc["official_drop"] = official_drop(doc, listed) if task in ("MSR", "MOC") else ""
    dropped = sum(1 for doc in docs if doc["official_drop"])
    out = [doc for doc in docs if not (options["strict"] and doc["official_drop"])]
    for doc in out:
        doc["n_official_dropped"] = dropped
    return out


def official_drop(doc: Mapping[str, Any], listed: dict[tuple[str, str | None], int] | None = None) -> str:
    """MSR/MOC: why the official script drops this record ("" when it does not): its question text
    (:func:`official_text_problem`), or an object annotated in none of the frames the official rule
    samples (``linspace`` positions, ``budget // 2`` a view, whatever rule this run uses).
    ``listed``: (folder, root) -> number of frame files (-1: unreadable), so each folder is listed once."""
    if doc.get("official_problem"):
        return str(doc["official_problem"])
    listed = {} if listed is None else listed
    per_view = int(doc["budget"]) // 2
    positions = {}
    for view, group in zip("AB", doc["media"]):
        key = (group["path"], doc.get("media_root") or None)
        if key not in listed:
            try:  # only the count matters here; a bad folder is reported when its frames are read
                listed[key] = len(frame_files(group["path"], doc["record"]))
            except (DataError, MediaError):
                listed[key] = -1
        if listed[key] < 0:
            return ""
        positions[view] = linspace_indices(listed[key], per_view)
    absent = absent_objects(doc["objects"], positions)
    return f"{', '.join(absent)} annotated in none of the sampled frames of its view" if absent else ""


_JSON_FIELDS = ("fields", "gold", "media", "objects", "bbox_rel", "bbox_path")


def to_row(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Nested values as JSON strings, so every doc of a task has the same flat Arrow schema."""
    row = {k: v for k, v in doc.items() if k not in _JSON_FIELDS}
    for k in _JSON_FIELDS:
        row[k] = json.dumps(doc.get(k), ensure_ascii=False)
    return row


def from_row(doc: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(doc)
    for k in _JSON_FIELDS:
        if isinstance(out.get(k), str):
            out[k] = json.loads(out[k])
    return out


def _process_docs(dataset: Any, task: str):
    return to_dataset([to_row(d) for d in load_docs(source_spec(dataset), task)])


def process_docs_bu(dataset):
    return _process_docs(dataset, "BU")


def process_docs_nc(dataset):
    return _process_docs(dataset, "NC")


def process_docs_cc(dataset):
    return _process_docs(dataset, "CC")


def process_docs_pea(dataset):
    return _process_docs(dataset, "PEA")


def process_docs_pi(dataset):
    return _process_docs(dataset, "PI")


def process_docs_fsa(dataset):
    return _process_docs(dataset, "FSA")


def process_docs_pss(dataset):
    return _process_docs(dataset, "PSS")


def process_docs_msr(dataset):
    return _process_docs(dataset, "MSR")


def process_docs_moc(dataset):
    return _process_docs(dataset, "MOC")


def process_docs_ccqa(dataset):
    return _process_docs(dataset, "CCQA")


# ----------------------------------------------------------------------------------------------- frames

def official_allocation(lengths: Sequence[float], total: int) -> list[int]:
    """The official ``allocate_frames``, in its float arithmetic: quota ``length / sum * total``,
    floors, then one more frame to each of the largest fractional parts (earlier first on ties).
    No group is promised a frame; all zeros when the lengths sum to 0."""
    whole = sum(lengths)
    if whole == 0:
        return [0] * len(lengths)
    quotas = [(x / whole) * total for x in lengths]
    parts = [math.floor(q) for q in quotas]
    spare = total - sum(parts)
    for i in sorted(range(len(quotas)), key=lambda i: -(quotas[i] - math.floor(quotas[i])))[:max(spare, 0)]:
        parts[i] += 1
    return parts


def _at_least_one(parts: list[int]) -> list[int]:
    """A group left without a frame takes one from the largest (an empty label misleads a model and
    crashes lmms-eval's Qwen2.5-VL class), when there are enough frames to go round."""
    parts = list(parts)
    if sum(parts) >= len(parts):
        for i in range(len(parts)):
            if parts[i] == 0:
                donor = parts.index(max(parts))
                parts[donor] -= 1
                parts[i] = 1
    return parts


def frame_budgets(task: str, total: int, lengths: Sequence[float], index_rule: str = DEFAULT_INDEX_RULE) -> list[int]:
    """Frames per video/segment. Equal tasks: ``total // n`` each, as the official scripts do (the
    remainder is not used: 128 frames over 3 videos is 42 each). PI/PSS: in proportion to each
    group's total interval length, largest remainder first (the official ``allocate_frames``:
    :func:`official_allocation` under the ``linspace`` rule, exact fractions under ``centre``),
    every group keeping at least one frame when ``total`` >= the number of groups."""
    n = len(lengths)
    if task in PROPORTIONAL:
        if index_rule == "linspace":
            return _at_least_one(official_allocation(lengths, total))
        return split_budget(total, lengths, "proportional")
    return [total // n] * n


def _lengths(groups: Sequence[Mapping[str, Any]], index_rule: str = "centre") -> list[float]:
    if index_rule == "linspace":  # the official code keeps only pieces with start < end
        return [sum(e - s for s, e in g["intervals"] if s < e) if g["intervals"] else 1.0 for g in groups]
    return [sum(abs(e - s) for s, e in g["intervals"]) if g["intervals"] else 1.0 for g in groups]


def _rule(doc: Mapping[str, Any]) -> str:
    return str(doc.get("index_rule") or "centre")  # a doc without the option: the rule it was made with


def _side(doc: Mapping[str, Any]) -> int | None:
    return int(doc.get("max_long_side") or 0) or None


def sample_frames(doc: Mapping[str, Any]) -> list[SampledFrames]:
    """Decode the frames of every video (or view) of a doc under its budget."""
    doc = from_row(doc)
    groups, task, rule = doc["media"], doc["task"], _rule(doc)
    budgets = frame_budgets(task, int(doc["budget"]), _lengths(groups, rule), rule)
    if groups[0]["kind"] == "folder":
        out = [sample_frame_folder(g["path"], k, max_long_side=_side(doc), record_id=doc["record"],
                                   root=doc.get("media_root") or None, index_rule=rule)
               for g, k in zip(groups, budgets)]
    elif rule == "linspace":  # each video (or group of intervals) on its own, under its own budget
        out = [sample_video(g["path"], k, intervals=[tuple(p) for p in g["intervals"]] if g["intervals"] else None,
                            max_long_side=_side(doc), record_id=doc["record"], index_rule=rule)
               for g, k in zip(groups, budgets)]
    else:
        requests = [VideoRequest(g["path"], [tuple(p) for p in g["intervals"]] if g["intervals"] else None, doc["record"])
                    for g in groups]
        if task in PROPORTIONAL:
            out = sample_videos(requests, int(doc["budget"]), "proportional", max_long_side=_side(doc))
        else:
            out = sample_videos(requests, sum(budgets), "equal", max_long_side=_side(doc))
    _require_frames(doc, [len(s.frames) for s in out])
    return out


def _require_frames(doc: Mapping[str, Any], counts: Sequence[int]) -> None:
    """Every label needs a frame: an empty video crashes lmms-eval's Qwen2.5-VL class and misleads any model."""
    for g, count in zip(doc["media"], counts):
        if count == 0:
            raise MediaError(f"no frame could be sampled for {g['label']}", record=doc["record"], path=g["path"],
                             fix="raise the frame budget ('frames' in the source file) to at least one frame per video")


def plan_frames(doc: Mapping[str, Any]) -> list[tuple[int, list[float], list[int], tuple[int, int] | None]]:
    """Per video/view: (frame count, timestamps, positions, source size), without decoding frames.

    Gives exactly what :func:`sample_frames` returns (a test checks it); simple model classes need
    it for ``doc_to_text``, which lmms-eval builds for every doc before inference.
    """
    doc = from_row(doc)
    groups, task, rule = doc["media"], doc["task"], _rule(doc)
    budgets = frame_budgets(task, int(doc["budget"]), _lengths(groups, rule), rule)
    out = []
    for g, k in zip(groups, budgets):
        if g["kind"] == "folder":
            files = frame_files(g["path"], doc["record"], root=doc.get("media_root") or None)
            positions = folder_positions(len(files), k, rule)
            size = None
            if positions:
                with Image.open(files[positions[0]][1]) as im:
                    size = im.size
            out.append((len(positions), [float(p) for p in positions], positions, size))
        else:
            info = video_info(g["path"], doc["record"])
            intervals = [tuple(p) for p in g["intervals"]] if g["intervals"] else None
            indices = frame_plan(info.num_frames, info.fps, k, intervals, rule)
            out.append((len(indices), [i / info.fps for i in indices], indices, (info.width, info.height)))
    _require_frames(doc, [p[0] for p in out])
    return out


# ----------------------------------------------------------------------------------------------- boxes (MSR/MOC)

def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st (the official script writes 21th, 22th)."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def official_ordinal(n: int) -> str:
    """The official script's ordinals: 1st, 2nd, 3rd, then 4th, ..., 21th, 22th (what the model reads)."""
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def box_scale(size: tuple[int, int] | None, max_long_side: int | None) -> float:
    """The factor frames were shrunk by: ``max_long_side / longer side`` when larger, else 1."""
    if size is None or max_long_side is None or max(size) <= max_long_side:
        return 1.0
    return max_long_side / max(size)


def object_lines(objects: Sequence[Mapping[str, Any]], positions: Mapping[str, Sequence[int]],
                 scales: Mapping[str, float]) -> list[str]:
    """The "Objects information" lines: for each object (view A first, then view B, each in order of
    first appearance), its box in the first sampled frame of its view where it is annotated, scaled
    to the resized frame and truncated to integers as the official ``process_frame`` does, the frame
    counted as the official script counts it (:func:`official_ordinal`). An object annotated in no
    sampled frame gets a "does not appear" line (the official script crashes there).

    ``positions[view]``: the sampled frames' 0-based positions in the view's sorted frame folder (the
    official script looks boxes up by that position); ``scales[view]``: :func:`box_scale`.
    """
    lines = []
    for ref in sorted(objects, key=lambda r: r["view"]):  # stable: keeps first-appearance order inside a view
        view, boxes = ref["view"], ref.get("boxes") or {}
        for j, position in enumerate(positions[view]):
            box = boxes.get(str(position))
            if isinstance(box, Mapping):
                s = scales[view]
                coords = [int(float(box[k]) * s) for k in ("xtl", "ytl", "xbr", "ybr")]
                lines.append(f"{ref['name']} appears in {official_ordinal(j + 1)} frame of view {view} with bbox "
                             f"[{', '.join(map(str, coords))}]")
                break
        else:
            lines.append(f"{ref['name']} does not appear in the sampled frames of view {view}")
    return lines


# ----------------------------------------------------------------------------------------------- prompts

def _prompt_values(doc: Mapping[str, Any], timestamps: Sequence[Sequence[float]],
                   positions: Sequence[Sequence[int]], sizes: Sequence[tuple[int, int] | None]) -> dict[str, Any]:
    values = dict(doc["fields"])
    if doc["task"] == "FSA":
        # the official script prints list(map(int, timestamps)): whole seconds, truncated
        values["TIME1"], values["TIME2"] = (str([int(t) for t in ts]) for ts in timestamps[:2])
    if doc["task"] in ("MSR", "MOC"):
        pos = {"A": list(positions[0]), "B": list(positions[1])}
        scales = {"A": box_scale(sizes[0], _side(doc)), "B": box_scale(sizes[1], _side(doc))}
        values["BBOX"] = "\n".join(object_lines(doc["objects"], pos, scales))
    return values


def _halves(doc: Mapping[str, Any], values: Mapping[str, Any]) -> tuple[str, str]:
    before, after = PROMPTS[doc["task"]].split(FRAMES_SLOT)
    return fill(before, values), fill(after, values)


def build_messages(doc: Mapping[str, Any], sampled: Sequence[SampledFrames]) -> list[dict[str, Any]]:
    """System prompt + one user turn: the task prompt with each label's frames at the frames slot."""
    doc = from_row(doc)
    values = _prompt_values(doc, [s.timestamps for s in sampled], [s.indices for s in sampled],
                            [s.source_size for s in sampled])
    before, after = _halves(doc, values)
    groups = [FrameGroup(g["text"], s.frames) for g, s in zip(doc["media"], sampled)]
    return interleaved_messages(before, groups, after, system=SYSTEM_PROMPT)


def doc_to_messages(doc, lmms_eval_specific_kwargs=None) -> list[dict[str, Any]]:
    return build_messages(doc, sample_frames(doc))


def doc_to_visual(doc, lmms_eval_specific_kwargs=None) -> list:
    """Every sampled frame, video after video (for simple model classes, which show them first)."""
    doc = from_row(doc)
    return flat_frames([FrameGroup(g["text"], s.frames) for g, s in zip(doc["media"], sample_frames(doc))])


def doc_to_text(doc, lmms_eval_specific_kwargs=None) -> str:
    """The prompt for simple model classes: the frames come before the text, so the frames slot says
    which of them belong to which label ("Video 1: frames 1-32"). The system prompt leads the text."""
    doc = from_row(doc)
    plan = plan_frames(doc)
    values = _prompt_values(doc, [p[1] for p in plan], [p[2] for p in plan], [p[3] for p in plan])
    before, after = _halves(doc, values)
    legend = frame_legend([(g["label"], p[0]) for g, p in zip(doc["media"], plan)])
    return f"{SYSTEM_PROMPT}\n{before}{legend}{after}"


# ----------------------------------------------------------------------------------------------- scoring

def parse_choice(response: str, letters: str, options: Sequence[str]) -> tuple[str | None, str | None]:
    """(letter, None) or (None, why): a bare letter, ``Answer: X``, ``\\boxed{X}``, the exact text of
    one option (with or without its letter), or a reply starting with a letter and a separator
    ("B. The man ...")."""
    full = dict(zip(letters, options))
    parsed = parse_option_letter(response, letters, names=full)
    if parsed.ok:
        return parsed.value, None
    bare = {letter: _OPTION_LETTER.sub("", text, count=1).strip() for letter, text in full.items()}
    again = parse_option_letter(response, letters, names=bare)
    if again.ok:
        return again.value, None
    # what models write around the letter: "The answer is B.", "Option B", "B. The man ...", full-width letters
    prose = parse_option_letter(response, letters, names=bare, prose=True)
    if prose.ok:
        return prose.value, None
    return None, parsed.error


def strict_interval(response: str) -> tuple[float, float] | None:
    """The official FSA reading: ``output.split(",")`` into exactly two ``float()``s, else None."""
    parts = str(response).split(",")
    if len(parts) != 2:
        return None
    try:
        return float(parts[0]), float(parts[1])
    except ValueError:
        return None


def video_group(doc: Mapping[str, Any]) -> str:
    """The videos (or frame folders) a question is asked over, order-free: questions on the same group
    are one cluster for error bars, as they share the clips the model saw."""
    media = doc.get("media") or []
    return " | ".join(sorted({str(m.get("rel")) for m in media if isinstance(m, Mapping)}))


def score_response(doc: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """The per-question item every metric reads: ``robust`` and ``strict`` values in [0, 1], and
    ``score``, the one of them the task's ``strict`` option selects."""
    doc = from_row(doc)
    task, gold = doc["task"], doc["gold"]
    if task == "CCQA":
        raise ValueError("CCQA replies are scored by the rubric judge (process_results_ccqa), not by score_response")
    text = response if isinstance(response, str) else ("" if response is None else str(response))
    item: dict[str, Any] = {"id": doc["id"], "task": task, "video_group": video_group(doc),
                            "pred": None, "gold": None, "parse_error": None,
                            "n_skipped": int(doc.get("n_skipped") or 0),
                            "official_drop": doc.get("official_drop") or None,
                            "n_official_dropped": int(doc.get("n_official_dropped") or 0)}
    if task == "BU":
        parsed = parse_letter_set(text, doc["letters"], prose=True)
        item["gold"] = "".join(gold["letters"])
        if parsed.ok:
            item["pred"] = "".join(sorted(parsed.value))
        robust = float(parsed.ok and sorted(parsed.value) == gold["letters"])
        strict = float(text == gold["exact"])
        item["parse_error"] = parsed.error
    elif task == "PSS":
        parsed = parse_order(text, len(doc["media"]))
        item["gold"] = "->".join(map(str, gold["order"]))
        if parsed.ok:
            item["pred"] = "->".join(map(str, parsed.value))
        robust = float(parsed.ok and list(parsed.value) == gold["order"])
        strict = float(text == gold["exact"])
        item["parse_error"] = parsed.error
    elif task == "FSA":
        parsed = parse_interval(text)
        target = tuple(gold["interval"])
        item["gold"] = list(target)
        robust = 0.0
        if parsed.ok:
            item["pred"] = list(parsed.value)
            # no swap: a reversed interval scores 0, as the official formula gives it (see README)
            robust = interval_iou(parsed.value, target)
        official = strict_interval(text)
        strict = interval_iou(official, target) if official is not None else 0.0
        item["reversed"] = bool(parsed.ok and parsed.value[1] < parsed.value[0])
        item["parse_error"] = parsed.error
    else:
        letter, error = parse_choice(text, doc["letters"], doc["options"])
        item["gold"], item["pred"], item["parse_error"] = gold["letter"], letter, error
        robust = float(letter == gold["letter"])
        strict = float(text == gold["exact"])
    item["robust"], item["strict"] = robust, strict
    item["score"] = strict if doc.get("strict") else robust
    return item


METRICS = ("score", "score_strict", "parse_fail", "skipped")
FSA_METRICS = (*METRICS, "reversed")
UAV_METRICS = (*METRICS, "official_dropped")  # MSR/MOC
CCQA_METRICS = ("score", "score_strict", "per_question_mean", "judge_errors", "skipped")
CCQA_JUDGED_METRICS = ("score", "score_strict", "per_question_mean")  # null while a verdict is missing


def process_results(doc, results):
    response = results[0] if results else ""
    item = score_response(doc, response)
    names = {"FSA": FSA_METRICS, "MSR": UAV_METRICS, "MOC": UAV_METRICS}.get(item["task"], METRICS)
    return with_unscored(dict.fromkeys(names, item), [response], doc=doc)


def _mean_percent(values: Sequence[float]) -> float:
    return 100.0 * sum(values) / len(values) if values else 0.0


def agg_score(items):
    return _mean_percent([float(i["score"]) for i in items])


def agg_score_strict(items):
    return _mean_percent([float(i["strict"]) for i in items])


def agg_parse_fail(items):
    return sum(1 for i in items if i.get("parse_error") is not None)


def agg_official_dropped(items):
    """MSR/MOC records the official script drops (it crashes, retries, then skips them): an object
    annotated in none of its view's sampled frames, or a placeholder only in an option. Kept and
    scored here by default, left out in strict mode; the same count either way."""
    return max((int(i.get("n_official_dropped") or 0) for i in items), default=0)


def agg_reversed(items):
    return sum(1 for i in items if i.get("reversed"))




# ----------------------------------------------------------------------------------------------- CCQA

def judge_item(response: str, doc: Mapping[str, Any]) -> JudgeItem:
    """What the rubric judge sees. An empty reply is still judged (all points uncovered), never dropped."""
    # strict: the judge's reply is read as the official scorer reads it (its first <score> block)
    return JudgeItem(question=doc["question"], prediction=response or "", reference=doc["answer_text"],
                     scoring_points=list(doc["scoring_points"]),
                     extra={"score_block": "first"} if doc.get("strict") else {})


def process_results_ccqa(doc, results):
    text, outcome = judged_parts(results)
    item = {"id": doc["id"], "task": "CCQA", "video_group": video_group(from_row(doc)), "judge": outcome.to_dict(),
            "n_skipped": int(doc.get("n_skipped") or 0)}
    return with_unscored(dict.fromkeys(CCQA_METRICS, item), [text], judge=outcome, judged=CCQA_JUDGED_METRICS,
                         doc=doc)


def agg_ccqa_score(items):
    """The official CCQA score: (covered + correct points) / (2 x points), over the judged questions
    (a question without a verdict is unscored: this is null then, never a 0)."""
    return rubric_micro_average([i["judge"] for i in items])


def agg_ccqa_per_question_mean(items):
    return rubric_per_question_mean([i["judge"] for i in items])


def agg_judge_errors(items):
    return judged_mean([i["judge"] for i in items]).n_errors


# A failed model request is unscored, not wrong (lmms_eval_plugins/outcome.py): every metric is null then.
agg_unscored = count_unscored
guard_aggregations(globals())
