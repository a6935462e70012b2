"""The one reader of task folders' YAML files: each file's task or group name, its kind, its
``include`` and its raw config, without importing any ``!function`` hook.

``tasks``/``info``, ``check-model``, ``new-benchmark`` (name clashes, also against lmms-eval's own
task folder) and ``doctor`` all index task folders through :func:`read_task_yamls`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lmms_eval_plugins.errors import DataError

SAMPLE_TOKEN = "sample"


class _RawLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe loading; a tag such as ``!function utils.agg`` stays the text ``"!function utils.agg"``."""


_RawLoader.add_multi_constructor("!", lambda loader, suffix, node: f"!{suffix} {getattr(node, 'value', '')}".rstrip())


@dataclass(frozen=True)
class TaskYaml:
    """One YAML file of a task folder (a task, a group, or a template such as ``_template_yaml``)."""

    path: Path
    config: Mapping[str, Any]  # as written; tags kept as text

    @property
    def kind(self) -> str:
        """ "group" (``group: NAME`` with a ``task:`` list), "task" (``task: NAME``), else "" (a template)."""
        if isinstance(self.config.get("group"), str) and isinstance(self.config.get("task"), list):
            return "group"
        return "task" if isinstance(self.config.get("task"), str) else ""

    @property
    def name(self) -> str:
        return str(self.config["group" if self.kind == "group" else "task"]) if self.kind else ""

    @property
    def include(self) -> str:
        include = self.config.get("include")
        return include if isinstance(include, str) else ""

    @property
    def members(self) -> tuple[Any, ...]:
        """A group's ``task:`` list as written (names, or dicts for inline sub-groups); () for a task."""
        return tuple(self.config["task"]) if self.kind == "group" else ()


def is_task_yaml_file(path: Path) -> bool:
    return path.suffix == ".yaml" or path.name.endswith("_yaml")


def read_task_yamls(
    folders: Iterable[Path], *, recursive: bool = True, skip_unreadable: bool = False
) -> list[TaskYaml]:
    """Every YAML file in ``folders`` (below them when ``recursive``), sorted by path.

    A file that is not valid UTF-8 YAML raises a :class:`DataError` naming it, or is left out with
    ``skip_unreadable`` (for folders that are not ours, such as lmms-eval's own tasks).
    """
    paths: set[Path] = set()
    for folder in folders:
        if folder.is_dir():
            paths.update(
                p
                for p in (folder.rglob("*") if recursive else folder.iterdir())
                if p.is_file() and is_task_yaml_file(p)
            )
    out: list[TaskYaml] = []
    for path in sorted(paths):
        try:
            config = yaml.load(path.read_text(encoding="utf-8"), Loader=_RawLoader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            if skip_unreadable:
                continue
            raise DataError(
                f"cannot read a task YAML file ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
                path=str(path),
                fix="fix its YAML syntax (UTF-8), or remove the file",
            ) from exc
        out.append(TaskYaml(path, config if isinstance(config, dict) else {}))
    return out


def names_by_kind(entries: Iterable[TaskYaml]) -> dict[str, str]:
    """name -> "task" | "group" (the first file in path order wins a name)."""
    out: dict[str, str] = {}
    for entry in entries:
        if entry.kind:
            out.setdefault(entry.name, entry.kind)
    return out


def is_sample_task(name: str) -> bool:
    """A task or group on the bundled sample data: ``sample`` is one of its name's ``_``-tokens after the
    first (``errorradar_sample``, ``causalstep_sample_restart_same``)."""
    return SAMPLE_TOKEN in name.split("_")[1:]


JUDGE_FILTER = "JudgeFilter"


def judge_of(entries: Mapping[str, TaskYaml], file: str) -> str:
    """The judge named by the ``JudgeFilter`` in ``file``'s ``filter_list`` or in a file it includes
    (``entries``: one folder's files by name); "" when no filter judges its replies."""
    seen: set[str] = set()
    while file in entries and file not in seen:
        seen.add(file)
        entry = entries[file]
        for pipeline in entry.config.get("filter_list") or []:
            steps = pipeline.get("filter") if isinstance(pipeline, dict) else None
            for step in steps if isinstance(steps, list) else []:
                if isinstance(step, dict) and JUDGE_FILTER in str(step.get("function", "")):
                    return str(step.get("judge") or JUDGE_FILTER)
        file = entry.include
    return ""


def judged_tasks(folders: Iterable[Path]) -> dict[str, str]:
    """task -> the judge its YAML names, for every judged task in ``folders`` (includes resolved per folder)."""
    out: dict[str, str] = {}
    for folder in folders:
        entries = {e.path.name: e for e in read_task_yamls([folder], recursive=False)}
        for file, entry in entries.items():
            judge = judge_of(entries, file) if entry.kind == "task" else ""
            if judge:
                out[entry.name] = judge
    return out
