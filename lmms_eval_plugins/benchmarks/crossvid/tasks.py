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
The package, one job a module: ``records`` (validating records, media paths, rows), ``frames`` (budgets,
index rules, sampling), ``prompts`` (templates, box lines, messages and text), ``scoring`` (replies,
items, aggregations, averages), ``baselines`` (oracle and chance replies). This module loads a task's
docs and is what the task folder's ``utils.py`` (lmms-eval's hooks) imports from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_eval_plugins.benchmarks.crossvid.baselines import chance_replies, oracle_reply
from lmms_eval_plugins.benchmarks.crossvid.frames import (  # noqa: F401  (re-exported: hooks, and what the tests read)
    DEFAULT_FRAMES,
    DEFAULT_INDEX_RULE,
    DEFAULT_MAX_LONG_SIDE,
    PROPORTIONAL,
    doc_to_visual,
    frame_budgets,
    official_allocation,
    plan_frames,
    sample_frames,
)
from lmms_eval_plugins.benchmarks.crossvid.prompts import (  # noqa: F401  (re-exported: hooks, and what the tests read)
    PROMPTS,
    SYSTEM_PROMPT,
    _halves,
    box_scale,
    build_messages,
    doc_to_messages,
    doc_to_text,
    object_lines,
    official_ordinal,
    ordinal,
)
from lmms_eval_plugins.benchmarks.crossvid.records import (  # noqa: F401  (re-exported: what the tests read)
    LETTERS,
    LOCAL_LAYOUT,
    MISSING_FIX,
    absent_objects,
    attach_boxes,
    attach_paths,
    check_media,
    from_row,
    normalize_record,
    official_text_problem,
    resolve_placeholders,
    to_row,
)
from lmms_eval_plugins.benchmarks.crossvid.scoring import (  # noqa: F401  (re-exported: the YAMLs' hooks, and what the tests read)
    CCQA_JUDGED_METRICS,
    CCQA_METRICS,
    DIMENSIONS,
    FSA_METRICS,
    METRICS,
    TASKS,
    UAV_METRICS,
    agg_ccqa_per_question_mean,
    agg_ccqa_score,
    agg_judge_errors,
    agg_official_dropped,
    agg_parse_fail,
    agg_reversed,
    agg_score,
    agg_score_strict,
    agg_unscored,
    crossvid_averages,
    judge_item,
    parse_choice,
    process_results,
    process_results_ccqa,
    score_response,
    strict_interval,
    video_group,
)
from lmms_eval_plugins.data import (
    DataSource,
    hub_snapshot,
    hub_store,
    keep_records_with_media,
    read_json,
    require_unique,
    resolve_source,
    source_spec,
    stamp_skipped,
    to_dataset,
)
from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.judges.filter import JudgeFilter  # noqa: F401  (used by the CCQA YAML)
from lmms_eval_plugins.media import (
    INDEX_RULES,
    frame_files,
    linspace_indices,
    uniform_indices,  # noqa: F401  (index_rule "centre"; the tests read it from here)
)
from lmms_eval_plugins.outcome import (  # noqa: F401 (group_mean: the group YAMLs' null-safe mean)
    agg_skipped,
    agg_skipped_by_reason,
    group_mean,
    guard_aggregations,
)
from lmms_eval_plugins.tasking import CHANCE_FIELD, ORACLE_FIELD, strict_requested

BENCHMARK = "crossvid"
HUB_REPO = "Chuntianli/CrossVid"
# The bundled sample data: set by the task folder's utils.py to the folder beside the YAMLs lmms-eval
# loaded (an installed or an exported task folder alike).
SAMPLE_DIR: Path | None = None


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


guard_aggregations(globals())  # agg_skipped, agg_skipped_by_reason as the YAMLs name them here
