"""The one reader of stored lmms-eval runs: ``report``, ``compare``, ``score`` and ``check-run`` use it.

An lmms-eval ``--output_path`` holds, per model run, ``<date>_results.json`` (see :data:`RESULTS_SUFFIX`)
and with ``--log_samples`` one ``<date>_samples_<task>.jsonl`` per task (read by
:mod:`lmms_eval_plugins.logged_samples`). Here:

- finding results files under a folder (:func:`discover_runs`, :func:`latest_results`) and the logged
  samples beside one (:func:`samples_path`, :func:`samples_files`);
- reading and checking one results JSON with the bounded JSON reader (:func:`read_results`);
- a run's metrics and error bars per task (:class:`TaskResult`, :func:`task_metrics`, :func:`task_error_bars`);
- the per-record items of logged samples (:func:`items_of`).

A file that cannot be used is a :class:`RunInputError` naming the file and what is wrong.
A stored run is data, never code: nothing read here is imported or executed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_eval_plugins import logged_samples, provenance

# the run files' names live with their reader; runs.samples_path etc. stay importable from here
from lmms_eval_plugins.logged_samples import RESULTS_SUFFIX, results_stem, samples_files, samples_path  # noqa: F401
from lmms_eval_plugins.data import JsonLimitError, parse_json
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.run_state import INTERVALS_KEY
from lmms_eval_plugins.compat.private import split_model_args_without_loading
from lmms_eval_plugins.safe_text import redact_model_args

JUDGE_REPORT_GLOB = "judge_report*.json"
# lmms-eval's ``get_datetime_str`` default (0.7.3, utils.py): the results' ``date`` is in this zone
# unless ``--timezone`` was given (recorded under config.resolved_cli_args.timezone).
LMMS_EVAL_DEFAULT_TIMEZONE = "Asia/Singapore"
# The error-bar companions lmms-eval writes next to ``<metric>,<filter>``: ``<metric>_stderr``
# (ours, in the metric's units: lmms_eval_plugins/errorbars.py), and its own CLT ones on the items'
# score_key (a fraction).
STDERR = "_stderr"


class RunInputError(Exception):
    """A stored run's file that cannot be used; the message names the file and what is wrong."""


@dataclass
class TaskResult:
    task: str
    metrics: dict[str, Any]
    results_path: Path
    n_samples: int | None = None
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    is_group: bool = False  # an lmms-eval group's aggregate (no logged samples of its own)
    # metric -> {"stderr": x, "stderr_clt": y, "stderr_clustered": z}: the numeric ones the results hold
    error_bars: dict[str, dict[str, float]] = field(default_factory=dict)
    # metric -> (low, high): the run's 95% percentile-bootstrap interval (results written since issue 37)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def samples_path(self) -> Path:
        return samples_path(self.results_path, self.task)

    def stderr(self, metric: str, kind: str = "stderr") -> float | None:
        return self.error_bars.get(metric, {}).get(kind)


@dataclass
class Run:
    label: str
    folder: Path
    model: str
    model_args: str
    results_files: list[Path]
    tasks: dict[str, TaskResult]
    info: dict[str, Any] = field(default_factory=dict)
    judge_reports: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _samples: dict[str, list[dict[str, Any]] | None] = field(default_factory=dict, repr=False)

    def samples(self, task: str) -> list[dict[str, Any]] | None:
        """The logged samples of ``task`` as :func:`logged_samples.lean` keeps them (doc_id, target, the
        metrics' items, each item once), or None (with a note) when missing or malformed."""
        if task not in self._samples:
            self._samples[task] = _read_samples(self.tasks[task].samples_path, self.notes)
        return self._samples[task]


def _read_samples(path: Path, notes: list[str]) -> list[dict[str, Any]] | None:
    if not path.is_file():
        notes.append(f"no logged samples {path} (run lmms-eval with --log_samples): plots that need them are left out")
        return None
    try:
        return logged_samples.read_samples(path, lean_records=True)  # scores only: no documents, prompts or replies
    except DataError as exc:  # a broken samples file costs its plots, not the report
        notes.append(f"malformed samples file {path}, {exc.problem}: plots that need it are left out")
        return None


# ------------------------------------------------------------------------------------ file names


# ------------------------------------------------------------------------------------ one task's entries


def _entries(raw: Mapping[str, Any]) -> dict[str, Any]:
    """lmms-eval's ``"name,filter"`` keys by name (stderr companions included); the ``none`` filter wins."""
    out: dict[str, Any] = {}
    chosen: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or key in ("alias", " "):
            continue
        name, _, filt = key.partition(",")
        if not name.strip() or (name in out and chosen[name] == "none"):
            continue
        out[name] = value
        chosen[name] = filt
    return out


def _split_stderr(name: str) -> tuple[str, str] | None:
    """``acc_stderr_clt`` -> (``acc``, ``stderr_clt``); None for a name that is no error bar."""
    base, sep, rest = name.rpartition(STDERR)
    if not sep or not base or rest not in ("", "_clt", "_clustered"):
        return None
    return base, STDERR[1:] + rest


def task_metrics(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A task's metrics from its lmms-eval results entry, without error-bar companions."""
    return {name: value for name, value in _entries(raw).items() if STDERR not in name}


def task_error_bars(raw: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """metric -> {kind: value} for every numeric ``<metric>_stderr[_clt|_clustered]`` (``N/A`` left out)."""
    out: dict[str, dict[str, float]] = {}
    for name, value in _entries(raw).items():
        split = _split_stderr(name)
        if split is None or isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            continue
        out.setdefault(split[0], {})[split[1]] = float(value)
    return out


def task_intervals(data: Mapping[str, Any], task: str) -> dict[str, tuple[float, float]]:
    """metric -> (low, high) of a task's stored 95% intervals; anything not two finite, ordered numbers is left out."""
    stored = data.get(INTERVALS_KEY)
    raw = stored.get(task) if isinstance(stored, dict) else None
    out: dict[str, tuple[float, float]] = {}
    for name, pair in _entries(raw if isinstance(raw, dict) else {}).items():
        if (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in pair)
            and pair[0] <= pair[1]
        ):
            out[name] = (float(pair[0]), float(pair[1]))
    return out


# ------------------------------------------------------------------------------------ one results file


def read_results(path: Path) -> dict[str, Any]:
    """A results JSON, read with the bounded reader and checked (task names are plain names)."""
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RunInputError(f"{path}: cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise RunInputError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "is the run still writing it, or was it cut short?"
        ) from exc
    except JsonLimitError as exc:  # deep nesting, a huge integer: data, refused by name (issue 27)
        raise RunInputError(f"{path}: {exc}: not a file lmms-eval wrote (damaged or hostile)") from exc
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise RunInputError(f'{path}: not an lmms-eval results file (no "results" object)')
    try:
        logged_samples.check_task_names(data, path)
    except DataError as exc:
        raise RunInputError(f"{path}: {exc.problem}; {exc.fix}") from exc
    return data


def _model_args_dict(model_args: Any) -> dict[str, str]:
    if isinstance(model_args, dict):
        return {str(k): str(v) for k, v in model_args.items()}
    out = {}
    for part in str(model_args or "").split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def model_label(data: Mapping[str, Any], folder: Path) -> str:
    """``pretrained`` (last path component) or the API model name from the model args, else
    ``config.model``, else the folder name."""
    config = data.get("config") or {}
    args = _model_args_dict(config.get("model_args"))
    for key in ("pretrained", "model_version", "model", "model_name", "model_id"):
        value = args.get(key)
        if value:
            return value.rstrip("/").split("/")[-1] or value
    return str(config.get("model") or data.get("model_name") or folder.name)


def results_date(path: Path, data: Mapping[str, Any]) -> str:
    """lmms-eval's ``date`` (``YYYYMMDD_HHMMSS`` in :func:`results_timezone`), else the file name's stem."""
    return str(data.get("date") or path.name[: -len(RESULTS_SUFFIX)])


def results_timezone(data: Mapping[str, Any]) -> str:
    """The zone lmms-eval wrote ``date`` in: its ``--timezone``, else its default."""
    config = data.get("config")
    cli = config.get("resolved_cli_args") if isinstance(config, dict) else None
    zone = cli.get("timezone") if isinstance(cli, dict) else None
    return zone if isinstance(zone, str) and zone else LMMS_EVAL_DEFAULT_TIMEZONE


def latest_results(output_dir: Path) -> Path | None:
    """The most recently written ``*_results.json`` under ``output_dir`` (None when there is none)."""
    found = sorted(output_dir.rglob(f"*{RESULTS_SUFFIX}"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


# ------------------------------------------------------------------------------------ runs


def load_run(folder: Path, files: Sequence[Path], *, label: str | None, skip_bad: bool) -> Run | None:
    notes: list[str] = []
    loaded: list[tuple[Path, dict[str, Any]]] = []
    for path in files:
        try:
            loaded.append((path, read_results(path)))
        except RunInputError as exc:
            if not skip_bad:
                raise
            notes.append(f"skipped: {exc}")
    if not loaded:
        return Run(label or folder.name, folder, "", "", list(files), {}, notes=notes) if notes else None
    loaded.sort(key=lambda pair: (results_date(*pair), pair[0].name))
    tasks: dict[str, TaskResult] = {}
    for path, data in loaded:  # oldest first: a newer file's task replaces an older one
        n_samples = data.get("n-samples") or {}
        hib = data.get("higher_is_better") or {}
        groups = {g for g, members in (data.get("group_subtasks") or {}).items() if members}
        for task, raw in data["results"].items():
            if not isinstance(raw, dict):
                notes.append(f"{path}: results for {task!r} are not an object; ignored")
                continue
            metrics = task_metrics(raw)
            if not metrics:
                continue  # a group header without aggregated metrics
            if task in tasks:
                notes.append(
                    f"task {task} is in {tasks[task].results_path.name} and {path.name}; the newer one is shown"
                )
            count = n_samples.get(task, {})
            tasks[task] = TaskResult(
                task,
                metrics,
                path,
                count.get("effective") if isinstance(count, dict) else None,
                hib.get(task) if isinstance(hib.get(task), dict) else {},
                task in groups,
                task_error_bars(raw),
                task_intervals(data, task),
            )
    newest_path, newest = loaded[-1]
    config = newest.get("config") or {}
    info = {
        "date": results_date(newest_path, newest),
        "timezone": results_timezone(newest),
        "lmms_eval_version": newest.get("lmms_eval_version"),
        "software": newest.get(provenance.RESULTS_KEY)
        if isinstance(newest.get(provenance.RESULTS_KEY), dict)
        else None,
        "limit": config.get("limit"),
        "gen_kwargs": config.get("gen_kwargs"),
        "model_backend": config.get("model_backend"),
        "total_evaluation_time_seconds": newest.get("total_evaluation_time_seconds"),
        "versions": {k: v for path, data in loaded for k, v in (data.get("versions") or {}).items()},
    }
    # Shown in every page the report writes: credential-like values are hidden here, once.
    model_args = config.get("model_args")
    return Run(
        label or model_label(newest, folder),
        folder,
        str(config.get("model") or ""),
        redact_model_args(model_args, split_model_args_without_loading)
        if isinstance(model_args, (str, dict))
        else json.dumps(model_args or ""),
        [p for p, _ in loaded],
        tasks,
        info,
        notes=notes,
    )


def _find_judge_reports(run_dir: Path, folder: Path, notes: list[str]) -> list[tuple[Path, dict[str, Any]]]:
    """``judge_report*.json`` in the run's folder and next to it: in its parent folder
    and in the RUN_DIR given on the command line (and that one's parent)."""
    candidates: list[Path] = list(folder.glob(JUDGE_REPORT_GLOB))
    given = run_dir if run_dir.is_dir() else run_dir.parent
    for base in {folder.parent, given, given.parent}:
        if base.is_dir():
            candidates.extend(base.glob(JUDGE_REPORT_GLOB))
    out = []
    for path in sorted(set(candidates)):
        try:
            data = parse_json(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("by_judge", {}), dict):
                raise ValueError("not a judge accounting object")
        except (OSError, ValueError) as exc:
            notes.append(f"judge accounting file {path} could not be read ({exc}); not shown")
            continue
        out.append((path, data))
    return out


def discover_runs(run_dir: Path, *, label: str | None = None, skip_bad: bool = False) -> list[Run]:
    """One Run per folder under ``run_dir`` that holds ``*_results.json`` files."""
    groups: dict[Path, list[Path]] = {}
    if run_dir.is_file():
        if not run_dir.name.endswith(RESULTS_SUFFIX):
            raise RunInputError(f"{run_dir}: not a folder and not a *{RESULTS_SUFFIX} file")
        groups[run_dir.parent] = [run_dir]
    elif run_dir.is_dir():
        for path in sorted(run_dir.rglob(f"*{RESULTS_SUFFIX}")):
            groups.setdefault(path.parent, []).append(path)
        if not groups:
            raise RunInputError(
                f"{run_dir}: no *{RESULTS_SUFFIX} file in it or below it (is it an lmms-eval --output_path?)"
            )
    else:
        raise RunInputError(f"{run_dir}: no such file or folder")
    runs = []
    for folder, files in sorted(groups.items()):
        by_model = _split_by_model(files)  # two models' results in one folder are two runs, never one
        for model_files in by_model:
            sub_label = label
            if label and (len(groups) > 1 or len(by_model) > 1):
                sub_label = f"{label} ({folder.relative_to(run_dir) if folder != run_dir else '.'})"
            run = load_run(folder, model_files, label=sub_label, skip_bad=skip_bad)
            if run is None:
                continue
            if len(by_model) > 1:
                run.notes.append(
                    f"{folder} holds the results of {len(by_model)} models (lmms-eval runs with one "
                    "--output_path); each is shown as its own run"
                )
            run.judge_reports = _find_judge_reports(run_dir, folder, run.notes)
            runs.append(run)
    return runs


def _split_by_model(files: Sequence[Path]) -> list[list[Path]]:
    """Results files grouped by the model that wrote them (``config.model`` and ``config.model_args``), in
    order of first appearance; a file that cannot be read stays with the first group (load_run names it)."""
    groups: dict[tuple[str, str], list[Path]] = {}
    unreadable: list[Path] = []
    for path in files:
        try:
            config = read_results(path).get("config") or {}
        except RunInputError:
            unreadable.append(path)
            continue
        key = (str(config.get("model") or ""), json.dumps(config.get("model_args"), sort_keys=True, default=str))
        groups.setdefault(key, []).append(path)
    out = list(groups.values()) or [[]]
    out[0] = out[0] + unreadable
    return out


def dedupe_labels(runs: Sequence[Run]) -> None:
    """Make run labels unique: the folder name added, then a number where still equal."""
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
    for run in runs:
        if seen[run.label] > 1:
            run.label = f"{run.label} ({run.folder.name})"
    counts: dict[str, int] = {}
    for run in runs:  # still clashing (same folder names): number them
        counts[run.label] = counts.get(run.label, 0) + 1
        if counts[run.label] > 1:
            run.label = f"{run.label} #{counts[run.label]}"


def items_of(samples: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The per-record item of each logged sample: the first metric value that is an object with
    ``gold``/``pred``/``correct`` (lmms-eval logs the same item under every metric name)."""
    out = []
    for sample in samples:
        for key, value in sample.items():
            if key in ("doc", "filtered_resps", "resps", "arguments"):
                continue
            if isinstance(value, dict) and ("pred" in value or "gold" in value or "correct" in value):
                out.append(value)
                break
    return out
