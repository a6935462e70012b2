"""Make our tasks and models visible to a plain ``lmms-eval --tasks ...`` run.

lmms-eval 0.7.3 reads task folders only from its own ``tasks/`` and ``--include_path``; the
``LMMS_EVAL_PLUGINS`` variable is applied after the task index is built (see
docs/upstream/README.md). It does, however, load the ``lmms_eval.models`` entry-point group when
``lmms_eval.models`` is first imported, which happens before any ``TaskManager`` exists. Our entry
point (:func:`register`) therefore returns our model manifests and, as a side effect, appends our
task folder to every ``TaskManager``'s search path. lmms-eval indexes its own folder first and keeps
the first definition of a name, so a built-in task wins a name clash.

Set ``LMMS_EVAL_PLUGINS_NO_TASK_HOOK=1`` to switch the hook off (then use ``--include_path``).

Our breakdowns (by question type, confusion matrices, prediction distributions) are dict-valued
metrics: complete in the results JSON, but one such value widens every row of lmms-eval's console
table. The same entry point therefore wraps ``lmms_eval.utils.make_table`` (bound by lmms-eval's
``__main__`` only after the model registry loads) so the console shows ``{6 entries, see results
JSON}`` for a dict or list value. Only the display changes; ``LMMS_EVAL_PLUGINS_FULL_TABLE=1`` turns
this off.

It also installs :mod:`lmms_eval_plugins.lmms_eval_fixes` (frames sent by the API chat classes).
"""

from __future__ import annotations

import copy
import os
from typing import Any

_PATCH_MARK = "_lmms_eval_plugins_patched"


def _model_manifests() -> list[Any]:
    from lmms_eval.models.registry_v2 import ModelManifest

    return [
        ModelManifest(model_id="oracle", simple_class_path="lmms_eval_plugins.models.oracle.Oracle",
                      chat_class_path="lmms_eval_plugins.models.oracle.OracleChat"),
        ModelManifest(model_id="random", simple_class_path="lmms_eval_plugins.models.random_baseline.RandomChoice",
                      chat_class_path="lmms_eval_plugins.models.random_baseline.RandomChoiceChat"),
    ]


def with_plugin_tasks(include_path: str | list[str] | None) -> list[str]:
    """Return ``include_path`` as a list with our task folder appended (once)."""
    from lmms_eval_plugins import tasks_dir

    ours = str(tasks_dir())
    if include_path is None:
        paths: list[str] = []
    elif isinstance(include_path, str):
        paths = [include_path]
    else:
        paths = list(include_path)
    if not any(os.path.realpath(p) == os.path.realpath(ours) for p in paths):
        paths.append(ours)
    return paths


def install_task_hook() -> bool:
    """Patch ``TaskManager.initialize_tasks`` so our folder is always indexed. Idempotent."""
    if not _enabled("LMMS_EVAL_PLUGINS_NO_TASK_HOOK"):
        return False
    from lmms_eval.tasks import TaskManager

    original = TaskManager.initialize_tasks
    if getattr(original, _PATCH_MARK, False):
        return True

    def initialize_tasks(self, include_path=None, include_defaults=True):
        return original(self, include_path=with_plugin_tasks(include_path), include_defaults=include_defaults)

    setattr(initialize_tasks, _PATCH_MARK, True)
    initialize_tasks.__wrapped__ = original  # type: ignore[attr-defined]
    TaskManager.initialize_tasks = initialize_tasks
    return True


def _enabled(switch: str) -> bool:
    return os.environ.get(switch, "") in ("", "0")


def compact_container_values(result_dict: dict[str, Any]) -> dict[str, Any]:
    """A copy of lmms-eval's results dict with dict/list metric values shortened for display."""
    compact = copy.deepcopy(result_dict)
    for column in ("results", "groups"):
        for metrics in compact.get(column, {}).values():
            for key, value in list(metrics.items()):
                if isinstance(value, (dict, list)) and value:
                    metrics[key] = f"{{{len(value)} entries, see results JSON}}"
    return compact


def install_table_hook() -> bool:
    if not _enabled("LMMS_EVAL_PLUGINS_FULL_TABLE"):
        return False
    import lmms_eval.utils as lmms_utils

    original = lmms_utils.make_table
    if getattr(original, _PATCH_MARK, False):
        return True

    def make_table(result_dict, column: str = "results", sort_results: bool = False):
        return original(compact_container_values(result_dict), column, sort_results)

    setattr(make_table, _PATCH_MARK, True)
    make_table.__wrapped__ = original  # type: ignore[attr-defined]
    lmms_utils.make_table = make_table
    return True


def register() -> list[Any]:
    """Entry point of the ``lmms_eval.models`` group: our models, plus the task-folder and table hooks."""
    install_task_hook()
    install_table_hook()
    from lmms_eval_plugins import lmms_eval_fixes

    lmms_eval_fixes.install()
    return _model_manifests()
