"""CausalStep: explicit stepwise causal reasoning over a video cut into causally linked segments.

Protocol (BENCHMARKS.md, the paper's Algorithm 1): a chain of questions per video, where the next
question depends on whether the last answer was right. Because the chain only continues after a
correct answer, every input the protocol can ask is known in advance, so ``process_docs`` expands
each video into independent requests (one doc each):

- ``desc``                 the descriptive question of S(i), shown S(i)                  (every i)
- ``causal_after_desc``    the causal question of S(i), shown S(i-1) and S(i), with the
                           descriptive question of S(i-1) and its correct answer         (i >= 2)
- ``causal_after_causal``  the same, with the causal question of S(i-1) and its answer   (i >= 3)
- ``causal_isolated``      the causal question of S(i), shown S(i) only, no history      (i >= 2)

The chain is replayed at scoring time (protocol.py, Algorithm 1): the filter (chain_filter.py)
attaches each video's replayed chain to its first doc (the descriptive question of S1) for the logs,
and the aggregations (scoring.py, named by spec.py) replay the same chains from the per-request items
to compute the metrics. Prompts: prompts.py; the typed request each doc carries: records.py. See the
task README for the prompt, the restart rules and the metric definitions.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_eval_plugins.benchmarks.causalstep import prompts, spec
from lmms_eval_plugins.benchmarks.causalstep.chain_filter import (
    GroupReplayFilter,
    unpack_filtered,
)
from lmms_eval_plugins.benchmarks.causalstep.prompts import LETTERS
from lmms_eval_plugins.benchmarks.causalstep.protocol import (
    CAUSAL_AFTER_CAUSAL,
    CAUSAL_AFTER_DESC,
    DESC,
    ID_FIELD,
    ISOLATED,
    RESTART_RULES,
    request_id,
)
from lmms_eval_plugins.benchmarks.causalstep.records import Request, Segment, record_of
from lmms_eval_plugins.benchmarks.causalstep.scoring import (
    CHAIN_FIELD,
    CHAIN_ON_FIELD,
    video_chain,
)
from lmms_eval_plugins.data import (
    DataSource,
    keep_records_with_media,
    read_json,
    require_fields,
    require_file,
    resolve_source,
    safe_path,
    source_spec,
    stamp_skipped,
    to_dataset,
)
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.media import intervals_past_end, video_info
from lmms_eval_plugins.parsing import parse_option_letter
from lmms_eval_plugins.prefetch import prefetched
from lmms_eval_plugins.task_hooks import item_values
from lmms_eval_plugins.doc_fields import CHANCE_FIELD, ORACLE_FIELD

BENCHMARK = "causalstep"
JSON_NAME = "causalstep.json"
LOCAL_LAYOUT = (
    f"causalstep/{JSON_NAME} (a JSON list, one record per video: video_id, video, category, segments; each "
    "segment has start/end in seconds, a 'desc' question and, from the second segment on, a 'causal' question, "
    "each {question, options (8 strings), answer (0-based index)}; see the causalstep task README) plus the "
    "videos under causalstep/videos/ (the 'video' paths are relative to causalstep/)"
)
DEFAULT_FRAMES_PER_SEGMENT = 8
DEFAULT_MAX_LONG_SIDE = 448

# ----------------------------------------------------------------------------------------------- records


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _question(raw: Any, *, where: str, record: str, path: Path) -> dict[str, Any]:
    """Validate one {question, options, answer} block."""
    if not isinstance(raw, Mapping):
        raise DataError(
            f"{where} is not an object",
            record=record,
            path=str(path),
            fix='give {"question": ..., "options": [8 strings], "answer": 0-based index}',
        )
    require_fields(raw, ("question", "options", "answer"), record_id=f"{record} {where}", path=path)
    question, options, answer = raw["question"], raw["options"], raw["answer"]
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: question is empty", record=record, path=str(path), fix="fill in the question text")
    if (
        not isinstance(options, list)
        or not 2 <= len(options) <= len(LETTERS)
        or not all(isinstance(o, str) and o.strip() for o in options)
    ):
        raise DataError(
            f"{where}: options must be a list of 2 to {len(LETTERS)} non-empty strings",
            record=record,
            path=str(path),
            fix="give the options as a list of strings (CausalStep has 8 per question)",
        )
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(options):
        raise DataError(
            f"{where}: answer {answer!r} is not a 0-based index into its {len(options)} options",
            record=record,
            path=str(path),
            fix="answer is the 0-based index of the correct option",
        )
    return {"question": question.strip(), "options": [o.strip() for o in options], "answer": answer}


def normalize_record(raw: Any, *, index: int, path: Path) -> dict[str, Any]:
    """Validate one video record of causalstep.json (schema in BENCHMARKS.md and the README)."""
    if not isinstance(raw, Mapping):
        raise DataError(
            f"entry {index} is not an object", path=str(path), fix="causalstep.json is a list of video records"
        )
    video_id = str(raw.get("video_id", "")).strip() or f"entry {index}"
    require_fields(raw, ("video_id", "video", "segments"), record_id=video_id, path=path)
    segments = raw["segments"]
    if not isinstance(segments, list) or not segments:
        raise DataError(
            "segments must be a non-empty list",
            record=video_id,
            path=str(path),
            fix="list the video's segments in order",
        )
    out = []
    for i, seg in enumerate(segments, start=1):
        where = f"segment {i}"
        if not isinstance(seg, Mapping):
            raise DataError(f"{where} is not an object", record=video_id, path=str(path), fix="see the README schema")
        start, end = _number(seg.get("start")), _number(seg.get("end"))
        if start is None or end is None or start < 0 or end <= start:
            raise DataError(
                f"{where}: start/end ({seg.get('start')!r}, {seg.get('end')!r}) is not an interval in seconds",
                record=video_id,
                path=str(path),
                fix="give 0 <= start < end, in seconds",
            )
        desc = _question(seg.get("desc"), where=f"{where} desc", record=video_id, path=path)
        causal_raw = seg.get("causal")
        if i == 1 and causal_raw is not None:
            raise DataError(
                "segment 1 has a causal question, but the first segment has none in CausalStep",
                record=video_id,
                path=str(path),
                fix='set "causal": null on the first segment',
            )
        if i > 1 and causal_raw is None:
            raise DataError(
                f"{where} has no causal question",
                record=video_id,
                path=str(path),
                fix="every segment after the first needs a causal question about S(i-1) -> S(i)",
            )
        causal = _question(causal_raw, where=f"{where} causal", record=video_id, path=path) if i > 1 else None
        out.append({"start": start, "end": end, "desc": desc, "causal": causal})
    category = raw.get("category")
    return {
        "video_id": video_id,
        "video": raw["video"],
        "category": str(category).strip() if category else "",
        "segments": out,
    }


def load_records(source: DataSource) -> list[dict[str, Any]]:
    assert source.root is not None  # CausalStep has no hub copy: sample or local only
    path = source.root / JSON_NAME
    if not path.is_file():
        raise DataError("causalstep.json not found", path=str(path), fix=f"use this layout: {LOCAL_LAYOUT}")
    raw = read_json(path)
    if not isinstance(raw, list) or not raw:
        raise DataError(
            "causalstep.json must be a non-empty JSON list of video records",
            path=str(path),
            fix=f"use this layout: {LOCAL_LAYOUT}",
        )
    records = [normalize_record(r, index=i, path=path) for i, r in enumerate(raw)]
    seen: set[str] = set()
    for record in records:
        if record["video_id"] in seen:
            raise DataError(
                "duplicate video_id", record=record["video_id"], path=str(path), fix="video ids must be unique"
            )
        seen.add(record["video_id"])
        record["video_path"] = str(safe_path(source.root, record["video"], record=record["video_id"], field="video"))

    def check(record: dict[str, Any]) -> None:
        require_file(
            Path(record["video_path"]),
            record=record["video_id"],
            what="video",
            fix=f"put the video there (layout: {LOCAL_LAYOUT}), or set LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA=1 "
            "to skip such videos",
        )
        info = video_info(record["video_path"], record["video_id"])  # a corrupt video is a (skippable) MediaError
        check_segments_within(record, info.duration, path)

    return keep_records_with_media(BENCHMARK, records, check)


def check_segments_within(record: Mapping[str, Any], duration: float, path: Path) -> None:
    """A ``DataError`` naming the record and segment when a segment starts at or after the video's end,
    or ends more than ``media.END_TOLERANCE_S`` past it."""
    spans = [(float(seg["start"]), float(seg["end"])) for seg in record["segments"]]
    late = intervals_past_end(spans, duration)
    if late:
        start, end = spans[late[0]]
        raise DataError(
            f"segment {late[0] + 1} ({start:g}-{end:g} s) lies past the end of the video ({duration:.2f} s)",
            record=str(record["video_id"]),
            path=str(path),
            fix=f"correct the segment times, or the 'video' file of this record ({record['video_path']})",
        )


# ----------------------------------------------------------------------------------------------- requests


def stable_permutation(key: str, n: int) -> list[int]:
    """A permutation of range(n) that depends only on ``key`` (Fisher-Yates driven by SHA-256).

    Python's ``hash`` is salted per process and ``random.shuffle``'s algorithm is not promised
    across Python versions; this is the same on every run, machine and version.
    """
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        digest = hashlib.sha256(f"{key}\0{i}".encode()).digest()
        j = int.from_bytes(digest[:8], "big") % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def shuffled(video_id: str, segment: int, qtype: str, block: Mapping[str, Any]) -> tuple[list[str], str]:
    """(options in evaluation order, gold letter). The seed is the video id and the question, so the
    three requests of one causal question show the same letters, on every run."""
    options = block["options"]
    order = stable_permutation(json.dumps([video_id, segment, qtype, block["question"]]), len(options))
    return [options[k] for k in order], LETTERS[order.index(block["answer"])]


def build_requests(
    record: Mapping[str, Any],
    *,
    restart: str = "next",
    frames: int = DEFAULT_FRAMES_PER_SEGMENT,
    max_long_side: int = DEFAULT_MAX_LONG_SIDE,
) -> list[dict[str, Any]]:
    """One doc per input the protocol can ask for this video, segment by segment (S1's desc first)."""
    video_id, segments = record["video_id"], record["segments"]
    n = len(segments)

    def span(i: int) -> Segment:
        return Segment(i, float(segments[i - 1]["start"]), float(segments[i - 1]["end"]))

    def doc(
        i: int, kind: str, qtype: str, shown: tuple[Segment, ...], prev: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        block = segments[i - 1][qtype]
        options, gold = shuffled(video_id, i, qtype, block)
        request = Request(
            request_id=request_id(video_id, i, kind),
            video_id=video_id,
            category=record["category"],
            video_path=record["video_path"],
            n_segments=n,
            segment=i,
            kind=kind,
            shown=shown,
            question=block["question"],
            options=tuple(options),
            gold=gold,
            prev_question=prev["question"] if prev else "",
            prev_answer=prev["options"][prev["answer"]] if prev else "",
            restart=restart,
            num_frames=frames,
            max_long_side=max_long_side,
        )
        return {**request.columns(), ORACLE_FIELD: gold, CHANCE_FIELD: list(LETTERS[: len(options)])}

    docs = []
    for i in range(1, n + 1):
        docs.append(doc(i, DESC, "desc", (span(i),), None))
        if i >= 2:
            docs.append(doc(i, CAUSAL_AFTER_DESC, "causal", (span(i - 1), span(i)), segments[i - 2]["desc"]))
        if i >= 3:
            docs.append(doc(i, CAUSAL_AFTER_CAUSAL, "causal", (span(i - 1), span(i)), segments[i - 2]["causal"]))
        if i >= 2:
            docs.append(doc(i, ISOLATED, "causal", (span(i),), None))
    return docs


def _options(source_of: Mapping[str, Any]) -> tuple[str, int, int]:
    restart = str(source_of.get("restart") or "next")
    if restart not in RESTART_RULES:
        raise DataError(
            f"unknown restart rule {restart!r} in the causalstep source file",
            fix=f"use one of {', '.join(RESTART_RULES)}",
        )
    frames = int(source_of.get("frames_per_segment") or DEFAULT_FRAMES_PER_SEGMENT)
    if frames < 1:
        raise DataError(f"frames_per_segment must be >= 1, got {frames}", fix="set a positive frame count")
    max_long_side = source_of.get("max_long_side", DEFAULT_MAX_LONG_SIDE)
    return restart, frames, int(max_long_side or 0)  # 0: no resizing


def process_docs(dataset: Any, sample_dir: Path | None = None):
    """``sample_dir``: the bundled sample data beside the YAMLs lmms-eval loaded (task_hooks binds it)."""
    source_of = source_spec(dataset)
    restart, frames, max_long_side = _options(source_of)
    source = resolve_source(
        BENCHMARK, source_of.get("source", "auto"), sample_dir=sample_dir, hub_repo=None, local_layout=LOCAL_LAYOUT
    )
    records = load_records(source)
    docs = [d for r in records for d in build_requests(r, restart=restart, frames=frames, max_long_side=max_long_side)]
    return to_dataset(stamp_skipped(docs, records))


# Frames of the next requests are decoded while the model answers this one (docs/frame-cache.md).
doc_to_messages = prefetched(prompts.doc_to_messages)
doc_to_visual = prefetched(prompts.doc_to_visual)
doc_to_text = prompts.doc_to_text


# ----------------------------------------------------------------------------------------------- scoring


def parse_answer(doc: Mapping[str, Any], response: str) -> tuple[str | None, str | None]:
    """(letter, None) or (None, why). ``parse_option_letter`` with ``prose=True``: a bare letter
    (``C``, ``(C)``, ``**C**``, ``\\boxed{C}``, ``\\text{C}``, full-width ``Ｃ``), ``Answer: C``, the exact
    text of one option, a reply that starts with a letter ("C. The boy ...", "(C) because ..."), an
    answer stated in prose ("The answer is C.", "The correct answer is (C) since ...") or "Option C".
    Two different letters asserted at the same level are unparseable ("ambiguous"), never a guess."""
    return _parse(record_of(doc).options, response)


def _parse(options: Sequence[str], response: str) -> tuple[str | None, str | None]:
    letters = LETTERS[: len(options)]
    parsed = parse_option_letter(response, letters, names=dict(zip(letters, options)), prose=True)
    if parsed.ok:
        return parsed.value, None
    return None, parsed.error


def score_request(doc: Mapping[str, Any], response: str) -> dict[str, Any]:
    """The per-request item every metric reads."""
    request = record_of(doc)
    pred, error = _parse(request.options, response)
    return {
        ID_FIELD: request.request_id,
        "video_id": request.video_id,
        "category": request.category,
        "n_segments": request.n_segments,
        "segment": request.segment,
        "kind": request.kind,
        "restart": request.restart,
        "gold": request.gold,
        "pred": pred,
        "correct": pred is not None and pred == request.gold,
        "parse_error": error,
    }


def replay_group(docs: Sequence[Mapping[str, Any]], responses: Sequence[str]) -> dict[str, Any]:
    """The filter's per-video function: score each request, then replay the chain."""
    return video_chain([score_request(d, r) for d, r in zip(docs, responses)])


class ChainReplayFilter(GroupReplayFilter):
    """Groups CausalStep's requests by video and attaches each video's replayed chain to its first
    doc (the descriptive question of S1), with a reference to it on the video's other docs."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(key="video_id", replay=replay_group, id_field=ID_FIELD, **kwargs)


def process_results(doc, results):
    text, attachment = unpack_filtered(results, doc=doc, id_field=ID_FIELD)
    # The chain rides on one metric's item only (spec.py), so each logged sample holds it once.
    item = {
        **score_request(doc, text),
        CHAIN_FIELD: attachment["result"] if attachment else None,
        CHAIN_ON_FIELD: attachment["result_on"] if attachment else None,
    }
    return item_values(spec.TEMPLATE, item, [text], doc=doc)


# What the task YAMLs name (lmms_eval_plugins/task_hooks.py adds the aggregations from the spec).
HOOKS = ("process_docs", "doc_to_visual", "doc_to_text", "doc_to_messages", "process_results", "ChainReplayFilter")
