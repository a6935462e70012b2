"""``lmms-eval-plugins tasks``: the tasks and groups this package adds (``--path``: their folder)."""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from lmms_eval_plugins import tasks_dir


class _IgnoreTags(yaml.SafeLoader):
    """Reads task YAMLs without importing their ``!function`` hooks."""


_IgnoreTags.add_multi_constructor("!", lambda loader, suffix, node: None)


def task_names(folder: Path | None = None) -> dict[str, str]:
    """name -> "task" | "group" for every YAML below our task folder."""
    names: dict[str, str] = {}
    for path in sorted((folder or tasks_dir()).rglob("*.yaml")):
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=_IgnoreTags) or {}
        if isinstance(config.get("group"), str) and isinstance(config.get("task"), list):
            names[config["group"]] = "group"
        elif isinstance(config.get("task"), str):
            names[config["task"]] = "task"
    return names


def sample_tasks(names: dict[str, str] | None = None) -> list[str]:
    """Every ``*_sample`` group, plus every ``*_sample`` task whose benchmark has no such group."""
    names = task_names() if names is None else names
    groups = sorted(n for n, kind in names.items() if kind == "group" and n.endswith("_sample"))
    covered = {g.split("_")[0] for g in groups}
    tasks = sorted(n for n, kind in names.items()
                   if kind == "task" and n.endswith("_sample") and n.split("_")[0] not in covered)
    return groups + tasks


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lmms-eval-plugins tasks", description=__doc__)
    parser.add_argument("--path", action="store_true", help="print the task folder (for --include_path)")
    args = parser.parse_args(argv)
    if args.path:
        print(tasks_dir())
        return 0
    for name, kind in sorted(task_names().items()):
        print(f"{name}\t{kind}")
    return 0
