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
The package, one job a module: ``records`` (validating records, media paths, the row and its typed
record), ``frames`` (budgets, index rules, sampling), ``prompts`` (templates, box lines, messages and
text), ``scoring`` (replies, items, aggregations), ``averages`` (the task and dimension lists, the
paper's averages), ``baselines`` (oracle and chance replies), ``spec`` (each metric and its
aggregation). This module loads a task's docs, builds each scored item and names in ``HOOKS`` what
the task YAMLs call; the task folder's ``utils.py`` hands those to lmms-eval with the spec's
aggregations (lmms_eval_plugins/task_hooks.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_eval_plugins.benchmarks.crossvid import spec
from lmms_eval_plugins.benchmarks.crossvid.averages import TASKS, crossvid_averages  # noqa: F401  (crossvid_averages: what the tests read)
from lmms_eval_plugins.benchmarks.crossvid.baselines import chance_replies, oracle_reply
from lmms_eval_plugins.benchmarks.crossvid.frames import (  # noqa: F401  (re-exported: hooks, and what the tests read)
    DEFAULT_FRAMES,
    DEFAULT_INDEX_RULE,
    DEFAULT_MAX_LONG_SIDE,
    PROPORTIONAL,
    frame_budgets,
    frame_drop,
    official_allocation,
    plan_frames,
    sample_frames,
)
from lmms_eval_plugins.benchmarks.crossvid.frames import (
    doc_to_visual as _doc_to_visual,
)
from lmms_eval_plugins.benchmarks.crossvid.prompts import (  # noqa: F401  (re-exported: hooks, and what the tests read)
    PROMPTS,
    SYSTEM_PROMPT,
    _halves,
    box_scale,
    build_messages,
    doc_to_text,
    object_lines,
    official_ordinal,
    ordinal,
)
from lmms_eval_plugins.benchmarks.crossvid.prompts import (
    doc_to_messages as _doc_to_messages,
)
from lmms_eval_plugins.benchmarks.crossvid.records import (  # noqa: F401  (re-exported: what the tests read)
    LETTERS,
    LOCAL_LAYOUT,
    MISSING_FIX,
    absent_objects,
    attach_boxes,
    attach_paths,
    check_media,
    normalize_record,
    object_ref,
    official_text_problem,
    record_of,
    resolve_placeholders,
    row_features,
)
from lmms_eval_plugins.benchmarks.crossvid.scoring import (  # noqa: F401  (re-exported: the YAMLs' hooks, and what the tests read)
    ccqa_item,
    judge_item,
    parse_choice,
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
from lmms_eval_plugins.judges.filter import JudgeFilter as _JudgeFilter
from lmms_eval_plugins.judges.filter import judged_parts
from lmms_eval_plugins.media import (
    INDEX_RULES,
    folder_listing,
    frame_files,
    linspace_indices,
    uniform_indices,  # noqa: F401  (index_rule "centre"; the tests read it from here)
)
from lmms_eval_plugins.outcome import NOT_JUDGED, judge_failure
from lmms_eval_plugins.outcome import group_mean  # noqa: F401  (a hook, in HOOKS: the group YAMLs' null-safe mean)
from lmms_eval_plugins.prefetch import prefetched
from lmms_eval_plugins.task_hooks import SAMPLE_DATA, item_values
from lmms_eval_plugins.doc_fields import CHANCE_FIELD, ORACLE_FIELD
from lmms_eval_plugins.run_state import strict_mode

BENCHMARK = "crossvid"
HUB_REPO = "Chuntianli/CrossVid"


# ----------------------------------------------------------------------------------------------- loading


def _options(source_of: Mapping[str, Any]) -> dict[str, Any]:
    frames = source_of.get("frames", DEFAULT_FRAMES)
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise DataError(
            f"'frames' in the crossvid source file must be a positive integer, got {frames!r}",
            fix="set the total frame budget per question, e.g. 128",
        )
    side = source_of.get("max_long_side", DEFAULT_MAX_LONG_SIDE)
    if side is not None and (isinstance(side, bool) or not isinstance(side, int) or side < 1):
        raise DataError(f"'max_long_side' must be a positive integer or null, got {side!r}", fix="e.g. 360")
    strict = source_of.get("strict", False)
    if not isinstance(strict, bool):
        raise DataError(
            f"'strict' must be true or false, got {strict!r}",
            fix="strict: true reproduces the official exact-string scoring",
        )
    rule = source_of.get("index_rule", DEFAULT_INDEX_RULE)
    if rule not in INDEX_RULES:
        raise DataError(
            f"'index_rule' must be one of {', '.join(INDEX_RULES)}, got {rule!r}",
            fix="linspace: the official frame indices (default); centre: bin centres",
        )
    return {"frames": frames, "max_long_side": side, "strict": strict or strict_mode(), "index_rule": rule}


def qa_path(root: Path, task: str) -> Path:
    return root / "QA" / f"{task}.json"


def read_qa(root: Path, task: str) -> tuple[list[Any], Path]:
    path = qa_path(root, task)
    if not path.is_file():
        raise DataError(
            f"the CrossVid {task} questions are missing", path=str(path), fix=f"use this layout: {LOCAL_LAYOUT}"
        )
    raw = read_json(path)
    if not isinstance(raw, list) or not raw:
        raise DataError(
            f"QA/{task}.json must be a non-empty JSON list", path=str(path), fix=f"use this layout: {LOCAL_LAYOUT}"
        )
    return raw, path


def hub_patterns(docs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The hub files a task's docs need (``allow_patterns`` for ``snapshot_download``)."""
    patterns: dict[str, None] = {}
    for doc in docs:
        for media in doc["media"]:
            patterns.setdefault(media["rel"] + ("/*" if media["kind"] == "folder" else ""), None)
        for box_file in doc.get("bbox_rel") or []:
            patterns.setdefault(box_file["path"], None)
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


def load_docs(source_of: Mapping[str, Any], task: str, sample_dir: Path | None = None) -> list[dict[str, Any]]:
    """Every doc of one task: validated, media resolved and checked, options and gold attached; each the
    row lmms-eval holds (Arrow-native: :func:`row_features`), read by the hooks through :func:`record_of`.
    ``sample_dir``: the bundled sample beside the YAMLs lmms-eval loaded (task_hooks binds it to the
    ``process_docs_*`` hooks); a direct call without it reads this package's own task folder."""
    options = _options(source_of)
    sample_dir = sample_dir if sample_dir is not None else spec.BENCHMARK.tasks_dir / SAMPLE_DATA
    source = resolve_source(
        BENCHMARK, source_of.get("source", "auto"), sample_dir=sample_dir, hub_repo=HUB_REPO, local_layout=LOCAL_LAYOUT
    )
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
        record = record_of(doc)
        doc[ORACLE_FIELD] = oracle_reply(record)
        doc[CHANCE_FIELD] = chance_replies(record)
    stamp_skipped(docs, kept)
    return docs


def official_inclusion(docs: Sequence[dict[str, Any]], task: str, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Marks each doc with ``official_drop`` (why the official script drops it, "" if it keeps it) and
    ``n_official_dropped`` (how many of the task it drops); strict mode leaves those docs out, as there."""
    listed: dict[tuple[str, str | None], int] = {}
    for doc in docs:
        doc.update(budget=options["frames"], index_rule=options["index_rule"])
        doc["official_drop"] = official_drop(doc, listed) if task in ("MSR", "MOC") else frame_drop(doc)
    dropped = sum(1 for doc in docs if doc["official_drop"])
    out = [doc for doc in docs if not (options["strict"] and doc["official_drop"])]
    for doc in out:
        doc["n_official_dropped"] = dropped
    return out


def official_drop(doc: Mapping[str, Any], listed: dict[tuple[str, str | None], int] | None = None) -> str:
    """MSR/MOC: why the official script drops this record ("" when it does not): its question text
    (:func:`official_text_problem`), or an object annotated in none of the frames the official rule
    samples (``linspace`` positions, ``budget // 2`` a view, whatever rule this run uses).
    ``listed``: (folder, root) -> the folder's entries (:func:`folder_listing`; None: unreadable), so each
    folder is listed once. A non-image entry at a sampled position drops the record too, as officially."""
    if doc.get("official_problem"):
        return str(doc["official_problem"])
    listed = {} if listed is None else listed
    per_view = int(doc["budget"]) // 2
    positions = {}
    for view, group in zip("AB", doc["media"]):
        key = (group["path"], doc.get("media_root") or None)
        if key not in listed:
            try:  # a bad folder is reported when its frames are read, not here
                frame_files(group["path"], doc["record"])
                listed[key] = folder_listing(group["path"], doc["record"])
            except (DataError, MediaError):
                listed[key] = None
        entries = listed[key]
        if entries is None:
            return ""
        # the official script samples sorted(os.listdir(folder)), whatever each entry is: a stray non-image
        # entry at a sampled position makes cv2.imread fail on every try, and the record is dropped
        positions[view] = linspace_indices(len(entries), per_view)
        stray = [entries[i][0] for i in positions[view] if not entries[i][1]]
        if stray:
            return f"{', '.join(stray)} in view {view} is no image, at a position the official script samples"
    absent = absent_objects([object_ref(o) for o in doc["objects"]], positions)
    return f"{', '.join(absent)} annotated in none of the sampled frames of its view" if absent else ""


def _process_docs_of(task: str) -> Callable[..., Any]:
    """The ``process_docs_<task>`` hook of one task (``sample_dir``: bound by the task folder's utils.py)."""

    def process_docs(dataset: Any, sample_dir: Path | None = None):
        return to_dataset(load_docs(source_spec(dataset), task, sample_dir), features=row_features(task))

    process_docs.__name__ = process_docs.__qualname__ = f"process_docs_{task.lower()}"
    return process_docs


# One per task of averages.TASKS, as crossvid_<task>.yaml names it (a test keeps the two lists equal).
process_docs_bu = _process_docs_of("BU")
process_docs_nc = _process_docs_of("NC")
process_docs_cc = _process_docs_of("CC")
process_docs_pea = _process_docs_of("PEA")
process_docs_pi = _process_docs_of("PI")
process_docs_fsa = _process_docs_of("FSA")
process_docs_pss = _process_docs_of("PSS")
process_docs_msr = _process_docs_of("MSR")
process_docs_moc = _process_docs_of("MOC")
process_docs_ccqa = _process_docs_of("CCQA")
PROCESS_DOCS = {
    "process_docs_bu": process_docs_bu,
    "process_docs_nc": process_docs_nc,
    "process_docs_cc": process_docs_cc,
    "process_docs_pea": process_docs_pea,
    "process_docs_pi": process_docs_pi,
    "process_docs_fsa": process_docs_fsa,
    "process_docs_pss": process_docs_pss,
    "process_docs_msr": process_docs_msr,
    "process_docs_moc": process_docs_moc,
    "process_docs_ccqa": process_docs_ccqa,
}

# Frames of the next requests are decoded while the model answers this one (docs/frame-cache.md).
doc_to_messages = prefetched(_doc_to_messages)
doc_to_visual = prefetched(_doc_to_visual)


# ----------------------------------------------------------------------------------------------- scoring

_METRICS_OF = {"FSA": spec.FSA_TEMPLATE, "MSR": spec.UAV_TEMPLATE, "MOC": spec.UAV_TEMPLATE}


def process_results(doc, results):
    response = results[0] if results else ""
    item = score_response(doc, response)
    return item_values(_METRICS_OF.get(item["task"], spec.TEMPLATE), item, [response], doc=doc)


def process_results_ccqa(doc, results):
    text, outcome = judged_parts(results)
    return item_values(spec.CCQA_TEMPLATE, ccqa_item(doc, outcome), [text], doc=doc, judge=ccqa_unscoring(doc, outcome))


def ccqa_unscoring(doc: Mapping[str, Any], outcome: Any) -> Any:
    """The judge outcome that makes a CCQA question unscored (None: none does).

    Default mode: any question without a verdict is unscored, so the score stays null until
    ``lmms-eval-plugins score`` judges it (a judge error may be an outage). Strict mode follows the
    official scorer's arithmetic (``eval/score_CCQA.py`` leaves a question whose judgement failed out of
    its sums and prints a number): a judge error leaves the question out of the denominators and counts
    it in ``judge_errors``; a question no judge was asked about (no judge configured, ``--predict_only``)
    stays unscored in both modes."""
    if not doc.get("strict"):
        return outcome
    return outcome if judge_failure(outcome) and str(judge_failure(outcome)).startswith(NOT_JUDGED) else None


# The judging filter the YAMLs name, told the judge instructions of this benchmark's spec.
JudgeFilter = _JudgeFilter.for_benchmark(spec.BENCHMARK, __name__)

# What the task YAMLs name (lmms_eval_plugins/task_hooks.py adds the aggregations from the spec).
HOOKS = (
    *PROCESS_DOCS,
    "doc_to_visual",
    "doc_to_text",
    "doc_to_messages",
    "process_results",
    "process_results_ccqa",
    "JudgeFilter",
    "judge_item",
    "group_mean",
)
