"""Everything the plugin does inside lmms-eval, in one table: each patch and each caller-frame read.

Nothing outside this subpackage replaces an lmms-eval attribute or reads a caller's frame
(``tests/test_compat.py`` checks the source). Modules:

- ``patches``: hooks that change what lmms-eval does around a run (task folders, task-name hints,
  console table, ``simple_evaluate``, the results file, error bars);
- ``fixes``: workarounds for lmms-eval 0.7.3 bugs (frames sent to API models, failed requests in
  ``--use_cache``, the per-request probe notice);
- ``frames``: the two caller-frame reads (the judge filter's instances, the model's request loop);
- ``private``: calls of private lmms-eval helpers (``_smart_comma_split``).

Before a patch is applied, :func:`check_entry` imports its target and compares the parameters the
plugin relies on. When the target is missing or its signature changed, one named warning is logged
("lmms-eval-plugins: compat <name>: <problem>; <feature> off: <fallback>") and the patch is skipped:
the feature is off or falls back, and results stay what lmms-eval itself computes. A frame read whose
check fails is skipped the same way. ``markdown_table()`` is the table in docs/architecture.md.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

MARK = "_lmms_eval_plugins_compat"  # set on every wrapper we install: check_entry looks through these
PATCH, FRAME_READ, PRIVATE_CALL = "patch", "frame-read", "private-call"
IMPORT, TASKS = "import", "tasks"  # install phases: see install_all


@dataclass(frozen=True)
class Entry:
    name: str  # short id, e.g. "task-folders"
    target: str  # "module:Qualified.attribute" replaced (patch) or whose frame is read (frame-read)
    kind: str  # PATCH, FRAME_READ or PRIVATE_CALL (a private lmms-eval function we call)
    params: tuple[str, ...]  # parameters the plugin relies on, in order (empty: not checked)
    why: str
    upstream: str | None  # a file under docs/upstream/, or None
    versions: str  # which lmms-eval versions need it
    without: str  # what the plugin does when the check fails (the fallback)
    feature: str  # the feature that needs it (named in the warning)


@dataclass(frozen=True)
class EntryCheck:
    entry: Entry
    ok: bool
    problem: str | None  # why not ok


ENTRIES: tuple[Entry, ...] = (
    Entry(
        "task-folders",
        "lmms_eval.tasks:TaskManager.initialize_tasks",
        PATCH,
        ("self", "include_path", "include_defaults"),
        "appends the installed benchmarks' task folders to every TaskManager's search path, so a plain "
        "`lmms-eval --tasks NAME` finds them; none in 0.7.3 (`LMMS_EVAL_PLUGINS` is read after the task index is built)",
        "lmms-eval-task-entry-points.patch",
        "0.7.x",
        "tasks are found only with `--include_path $(lmms-eval-plugins tasks --path)`, and the entries installed "
        "when a TaskManager is built (evaluate-hook, results-hook, error-bars, probe-notice) stay off",
        "task discovery",
    ),
    Entry(
        "console-table",
        "lmms_eval.utils:make_table",
        PATCH,
        ("result_dict", "column", "sort_results"),
        "shows dict/list metrics as `{N entries, see results JSON}`, no stderr for count and breakdown rows, and "
        "ends the output with the unscored-samples block (judge failures by cause and host); also rebinds the name in `lmms_eval.evaluator` and `lmms_eval.__main__`; none in 0.7.3",
        None,
        "0.7.x",
        "the console table shows breakdowns in full, a 0.0000 stderr for counts and no unscored block "
        "(the results JSON is the same)",
        "compact console table",
    ),
    Entry(
        "evaluate-hook",
        "lmms_eval.evaluator:simple_evaluate",
        PATCH,
        ("predict_only",),
        "starts each run's own state (judge session, media that failed to decode), notes `--predict_only` for "
        "the judge filters (no judge calls; `score` judges later) and turns a plugin "
        "error into a short closing block; none in 0.7.3 (filters never see the flag)",
        None,
        "0.7.x",
        "judge filters call the judge under --predict_only too, and a plugin error ends with "
        "lmms-eval's traceback only",
        "predict-only judging deferral",
    ),
    Entry(
        "results-hook",
        "lmms_eval.loggers.evaluation_tracker:EvaluationTracker.save_results_aggregated",
        PATCH,
        ("self", "results", "samples", "datetime_str"),
        "writes software versions and judge accounting into the results JSON (and judge_report_<date>.json); "
        "none in 0.7.3",
        None,
        "0.7.x",
        "the results JSON has no versions or judge accounting (judge_report.json beside the judge cache still is)",
        "versions and judge accounting in results",
    ),
    Entry(
        "samples-writer",
        "lmms_eval.loggers.evaluation_tracker:EvaluationTracker.save_results_samples",
        PATCH,
        ("self", "task_name", "samples"),
        "our tasks' samples lines hold each per-sample item once: a metric whose item equals the line's first "
        "metric item is left out (readers find it there: `logged_samples.item_of`); none in 0.7.3 (it logs the "
        "item shared by every metric once per metric, up to 23 times a line)",
        None,
        "0.7.x",
        "samples files repeat the shared item under every metric name (2-3x larger; read the same)",
        "samples lines without repeats",
    ),
    Entry(
        "error-bars",
        "lmms_eval.evaluator_utils:TaskOutput.calculate_aggregate_metric",
        PATCH,
        ("self", "bootstrap_iters"),
        "fills `<metric>_stderr` for our custom aggregations from the benchmark spec; none in 0.7.3 "
        "(its stderr covers only known aggregations, its `_stderr_clt` only means of a `score_key`)",
        None,
        "0.7.x",
        "`<metric>_stderr` stays N/A for our metrics (values unchanged)",
        "error bars",
    ),
    Entry(
        "clt-columns",
        "lmms_eval.evaluator_utils:TaskOutput.calculate_clt_aggregate_metric",
        PATCH,
        ("self",),
        "puts lmms-eval's `_stderr_clt`/`_stderr_clustered` of our tasks in each metric's units: the mean's own for "
        "a mean of per-item scores, N/A for a metric that is not a mean; none in 0.7.3 (it takes an item's 0-1 "
        "`score` field for every metric of a task)",
        None,
        "0.7.x",
        "the console's Stderr_CLT/Stderr_Clustered columns show one 0-1 figure for every metric of our tasks "
        "(the Stderr column and the results' `_stderr` are right)",
        "error bar columns in metric units",
    ),
    Entry(
        "task-names",
        "lmms_eval.tasks:TaskManager.match_tasks",
        PATCH,
        ("self", "task_list"),
        "a requested task name lmms-eval does not know gets a one-line 'did you mean' (closest names) after "
        "lmms-eval's own 'Tasks not found' error, and the failure is recorded for `check-run`; none in 0.7.3",
        None,
        "0.7.x",
        "a misspelled task ends with lmms-eval's traceback only, and `check-run` guesses from the "
        "installed benchmarks' task names",
        "did-you-mean for task names",
    ),
    Entry(
        "frames-content-key",
        "lmms_eval.protocol:encode_image_to_base64",
        PATCH,
        ("image", "image_format", "convert_rgb", "quality", "cache"),
        "the per-request encoding cache keys PIL frames on id(); a reused id sends an earlier frame's picture "
        "(API chat classes); we key on pixel content; none in 0.7.3",
        "lmms-eval-openai-frames.patch",
        "0.7.3",
        "API chat classes (openai, vllm) may send a wrong frame; prefer a local model class",
        "exact frames for API models",
    ),
    Entry(
        "frames-unpadded",
        "lmms_eval.protocol:fetch_video",
        PATCH,
        ("ele",),
        "qwen_vl_utils pads an odd frame list to even; an API gets separate images, so the padded copy is dropped; "
        "none in 0.7.3",
        "lmms-eval-openai-frames.patch",
        "0.7.3",
        "API chat classes send one extra (repeated) frame for an odd frame count",
        "exact frame count for API models",
    ),
    Entry(
        "cache-valid",
        "lmms_eval.caching.response_cache:ResponseCache._is_valid_response",
        PATCH,
        ("response", "request_type"),
        "with `--use_cache`, a failed request's marker was stored as the answer; none in 0.7.3",
        None,
        "0.7.3",
        "a failed request may be stored by --use_cache and replayed as the answer",
        "--use_cache failure filter",
    ),
    Entry(
        "cache-lookup",
        "lmms_eval.caching.response_cache:ResponseCache._lookup",
        PATCH,
        ("self", "cache_key"),
        "a failure marker already in the cache (or its audit-log replay) is served as a miss; none in 0.7.3",
        None,
        "0.7.3",
        "a failure marker already in a --use_cache file is replayed as the answer",
        "--use_cache failure filter",
    ),
    Entry(
        "probe-notice",
        "lmms_eval.models:get_model",
        PATCH,
        ("model_name", "force_simple"),
        "collapses qwen2_5_vl's per-request 'Failed to probe video' notice for frame lists into one line by "
        "giving the resolved class's module a filtering `eval_logger`; none in 0.7.3",
        None,
        "0.7.3",
        "the notice is logged once per video request (harmless)",
        "collapsed probe notice",
    ),
    Entry(
        "filter-instances",
        "lmms_eval.api.filter:FilterEnsemble.apply",
        FRAME_READ,
        ("self", "instances", "docs"),
        "`Filter.apply(resps, docs)` gets this rank's responses but all documents; the caller's `instances` "
        "argument (its doc_id) aligns them; none in 0.7.3 (a filter holds no reference to its task)",
        None,
        "0.7.x",
        "documents are aligned by position (right for one process and --limit, not for several ranks or --offset)",
        "judge filter document alignment",
    ),
    Entry(
        "request-loop",
        "lmms_eval.utils:Collator.__init__",
        FRAME_READ,
        ("self", "arr", "sort_fn", "group_fn", "grouping"),
        "decode-ahead finds the model's request loop on the stack (`self.task_dict`, its `Collator`'s "
        "`arr_with_indices`/`fn`/`grouping`, the openai class's `dispatch_order`) to learn the request order; "
        "none in 0.7.3",
        None,
        "0.7.x",
        "inputs are prepared inline when the model asks (no decode-ahead; same results)",
        "decode-ahead",
    ),
    Entry(
        "model-args-split",
        "lmms_eval.utils:_smart_comma_split",
        PRIVATE_CALL,
        ("args_string",),
        "`check-model` splits `--model_args` exactly as lmms-eval does (a comma inside quotes or braces does not "
        "split); none in 0.7.3 (the public `simple_parse_args_string` also converts the values)",
        None,
        "0.7.x",
        "`--model_args` is split by the plugin's copy of the same rule (`split_outside_brackets`)",
        "lmms-eval's own --model_args split",
    ),
)

# name -> (phase, "module:installer"); frame reads and private calls have no installer (their
# callers ask `available`).
# IMPORT entries install from our lmms_eval.models entry point; TASKS entries target modules that
# import lmms_eval.models themselves, so they install when the first TaskManager is built.
_INSTALLERS: dict[str, tuple[str, str | None]] = {
    "task-folders": (IMPORT, "lmms_eval_plugins.compat.patches:install_task_hook"),
    "console-table": (IMPORT, "lmms_eval_plugins.compat.patches:install_table_hook"),
    "task-names": (IMPORT, "lmms_eval_plugins.compat.patches:install_task_names_hook"),
    "frames-content-key": (IMPORT, "lmms_eval_plugins.compat.fixes:install_encoder"),
    "frames-unpadded": (IMPORT, "lmms_eval_plugins.compat.fixes:install_fetch_video"),
    "cache-valid": (IMPORT, "lmms_eval_plugins.compat.fixes:install_cache_valid"),
    "cache-lookup": (IMPORT, "lmms_eval_plugins.compat.fixes:install_cache_lookup"),
    "evaluate-hook": (TASKS, "lmms_eval_plugins.compat.patches:install_evaluate_hook"),
    "results-hook": (TASKS, "lmms_eval_plugins.compat.patches:install_results_hook"),
    "samples-writer": (TASKS, "lmms_eval_plugins.compat.patches:install_samples_writer"),
    "error-bars": (TASKS, "lmms_eval_plugins.compat.patches:install_stderr_hook"),
    "clt-columns": (TASKS, "lmms_eval_plugins.compat.patches:install_clt_hook"),
    "probe-notice": (TASKS, "lmms_eval_plugins.compat.fixes:install_model_hook"),
    "filter-instances": (TASKS, None),
    "request-loop": (TASKS, None),
    "model-args-split": (TASKS, None),
}

_warned: set[str] = set()  # entries whose failed check was logged in this process
_available: dict[str, bool] = {}  # frame reads and private calls: the check's result, once per process


def entry(name: str) -> Entry:
    for e in ENTRIES:
        if e.name == name:
            return e
    raise KeyError(f"no compatibility entry {name!r}; known: {', '.join(e.name for e in ENTRIES)}")


def unwrap(obj: object) -> object:
    """``obj`` with our own wrappers (marked with MARK) peeled off."""
    seen = 0
    while getattr(obj, MARK, False) and hasattr(obj, "__wrapped__") and seen < 10:
        obj, seen = obj.__wrapped__, seen + 1  # type: ignore[attr-defined]
    return obj


def resolve(target: str) -> object:
    """The attribute ``target`` names ("module:Qual.name"); ImportError/AttributeError when absent."""
    module_name, _, qualname = target.partition(":")
    obj: object = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def signature_problem(fn: object, params: tuple[str, ...]) -> str | None:
    """Why ``fn``'s parameters do not include ``params`` in that order, or None."""
    if not params:
        return None
    try:
        names = list(inspect.signature(fn).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        return f"signature unreadable ({exc})"
    shown = f"signature ({', '.join(names)})"
    missing = [p for p in params if p not in names]
    if missing:
        return f"{shown} lacks {', '.join(repr(p) for p in missing)}"
    positions = [names.index(p) for p in params]
    if positions != sorted(positions):
        return f"{shown} does not take ({', '.join(params)}) in this order"
    return None


def check_entry(entry: Entry) -> EntryCheck:
    """Is ``entry``'s target present with the parameters the plugin relies on? Never raises."""
    try:
        obj = unwrap(resolve(entry.target))
    except Exception as exc:  # noqa: BLE001 - any failure to import or resolve is "missing"
        return EntryCheck(entry, False, f"missing ({type(exc).__name__}: {exc})")
    if not callable(obj):
        return EntryCheck(entry, False, f"missing ({entry.target} is {type(obj).__name__}, not callable)")
    problem = signature_problem(obj, entry.params)
    return EntryCheck(entry, problem is None, problem)


def check_all() -> list[EntryCheck]:
    return [check_entry(e) for e in ENTRIES]


def warning_text(check: EntryCheck) -> str:
    e = check.entry
    return f"lmms-eval-plugins: compat {e.name}: {check.problem}; {e.feature} off: {e.without}"


def _checked(e: Entry) -> bool:
    check = check_entry(e)
    if not check.ok and e.name not in _warned:
        _warned.add(e.name)
        log.warning(warning_text(check))
    return check.ok


def _installer(spec: str) -> Callable[[], bool]:
    module_name, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def install(name: str) -> bool:
    """Check entry ``name`` and apply it (frame reads: record that it may be read). Idempotent.
    False: the check failed (one warning per process) or a setting switched it off."""
    e = entry(name)
    if not _checked(e):
        _available[name] = False
        return False
    _available[name] = True
    spec = _INSTALLERS[name][1]
    return True if spec is None else bool(_installer(spec)())


def install_all(phase: str | None = None) -> dict[str, bool]:
    """Install every entry of ``phase`` (IMPORT or TASKS; None: all). name -> applied."""
    return {e.name: install(e.name) for e in ENTRIES if phase is None or _INSTALLERS[e.name][0] == phase}


def available(name: str) -> bool:
    """May the frame read (or private call) ``name`` be done? Checked once per process (a failed check warns once)."""
    if name not in _available:
        _available[name] = _checked(entry(name))
    return _available[name]


def _cell(text: str | None) -> str:
    return (text or "none").replace("|", "\\|").replace("\n", " ")


def markdown_table() -> str:
    """The compatibility table of docs/architecture.md."""
    rows = [
        "| Entry | Replaces / reads | Kind | Why | Upstream patch | lmms-eval versions | Without it |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in ENTRIES:
        upstream = f"`docs/upstream/{e.upstream}`" if e.upstream else "none"
        rows.append(
            f"| `{e.name}` | `{e.target}` | {e.kind} | {_cell(e.why)} | {upstream} | {_cell(e.versions)} | "
            f"{_cell(e.feature)} off: {_cell(e.without)} |"
        )
    return "\n".join(rows) + "\n"
