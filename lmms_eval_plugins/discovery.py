"""Make our tasks and models visible to a plain ``lmms-eval --tasks ...`` run.

lmms-eval 0.7.3 reads task folders only from its own ``tasks/`` and ``--include_path``; the
``LMMS_EVAL_PLUGINS`` variable is applied after the task index is built (see
docs/upstream/README.md). It does, however, load the ``lmms_eval.models`` entry-point group when
``lmms_eval.models`` is first imported, which happens before any ``TaskManager`` exists. Our entry
point (:func:`register`) therefore returns our model manifests and installs the compatibility layer
(:mod:`lmms_eval_plugins.compat`), whose ``task-folders`` entry appends :func:`plugin_task_dirs` to
every ``TaskManager``'s search path. Everything that touches lmms-eval internals lives there, with
its table; this module only says which folders and models are ours.

Set ``LMMS_EVAL_PLUGINS_NO_TASK_HOOK=1`` to stop the appending (then use ``--include_path``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def _model_manifests() -> list[Any]:
    from lmms_eval.models.registry_v2 import ModelManifest

    return [
        ModelManifest(
            model_id="oracle",
            simple_class_path="lmms_eval_plugins.models.oracle.Oracle",
            chat_class_path="lmms_eval_plugins.models.oracle.OracleChat",
        ),
        ModelManifest(
            model_id="random",
            simple_class_path="lmms_eval_plugins.models.random_baseline.RandomChoice",
            chat_class_path="lmms_eval_plugins.models.random_baseline.RandomChoiceChat",
        ),
        ModelManifest(
            model_id="replay",
            simple_class_path="lmms_eval_plugins.models.replay.Replay",
            chat_class_path="lmms_eval_plugins.models.replay.ReplayChat",
        ),
    ]


def plugin_task_dirs() -> list[str]:
    """Our task folder, then the task folder of every other installed benchmark that lies outside it
    (packages registered in the ``lmms_eval_plugins.benchmarks`` entry-point group)."""
    from lmms_eval_plugins import tasks_dir
    from lmms_eval_plugins.benchmark import ordered_benchmarks

    ours = tasks_dir()
    dirs = [str(ours)]
    for spec in ordered_benchmarks():
        folder = Path(spec.tasks_dir).resolve()
        if folder.is_dir() and ours not in folder.parents and folder != ours and str(folder) not in dirs:
            dirs.append(str(folder))
    return dirs


def with_plugin_tasks(include_path: str | list[str] | None) -> list[str]:
    """Return ``include_path`` as a list with the installed benchmarks' task folders appended (once)."""
    if include_path is None:
        paths: list[str] = []
    elif isinstance(include_path, str):
        paths = [include_path]
    else:
        paths = list(include_path)
    for folder in plugin_task_dirs():
        if not any(os.path.realpath(p) == os.path.realpath(folder) for p in paths):
            paths.append(folder)
    return paths


def register() -> list[Any]:
    """Entry point of the ``lmms_eval.models`` group: our models; installs the compatibility layer's
    import-phase entries (task folders, console table, frame and cache fixes)."""
    from lmms_eval_plugins import compat

    compat.install_all(compat.IMPORT)
    return _model_manifests()
