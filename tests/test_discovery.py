"""Task and model discovery: plain ``lmms-eval --tasks ...`` sees our tasks, built-ins win clashes."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from lmms_eval_plugins import compat, discovery, tasks_dir
from lmms_eval_plugins.tasks_command import task_names
from lmms_eval_plugins.cli_run import OFFLINE_ENV

pytestmark = pytest.mark.cli


def _lmms_eval(*args: str, env: dict[str, str] | None = None) -> str:
    # outside the checkout: `python -m` puts the working directory first on sys.path
    completed = subprocess.run(
        [sys.executable, "-m", "lmms_eval", *args],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, **OFFLINE_ENV, **(env or {})},
        timeout=300,
    )
    return completed.stdout + completed.stderr


def test_lmms_eval_lists_our_tasks_without_flags():
    listed = _lmms_eval("--tasks", "list")
    for name in task_names():
        assert f" - {name}\n" in listed or f" - {name}\x1b" in listed, name


def test_hook_can_be_switched_off_and_include_path_still_works():
    env = {"LMMS_EVAL_PLUGINS_NO_TASK_HOOK": "1"}
    assert "errorradar_step" not in _lmms_eval("--tasks", "list", env=env)
    assert " - errorradar_step" in _lmms_eval("--tasks", "list", "--include_path", str(tasks_dir()), env=env)


def test_entry_point_is_registered_for_lmms_eval_models():
    from importlib.metadata import entry_points

    targets = [ep.value for ep in entry_points(group="lmms_eval.models")]
    assert "lmms_eval_plugins.discovery:register" in targets


def test_models_resolve_through_lmms_eval_registry():
    from lmms_eval.models import get_model

    assert get_model("oracle").__name__ == "OracleChat"
    assert get_model("oracle", force_simple=True).__name__ == "Oracle"
    assert get_model("random").__name__ == "RandomChoiceChat"


def test_builtin_task_wins_a_name_clash(tmp_path, monkeypatch):
    from lmms_eval.tasks import TaskManager

    assert compat.install("task-folders")
    builtin = TaskManager(include_defaults=True)
    name = next(n for n in builtin.all_subtasks if n not in task_names())
    (tmp_path / "clash.yaml").write_text(f"task: {name}\ndataset_path: json\n")
    (tmp_path / "ours.yaml").write_text("task: lmms_eval_plugins_probe_task\ndataset_path: json\n")
    monkeypatch.setattr("lmms_eval_plugins.tasks_dir", lambda: tmp_path)
    manager = TaskManager()
    assert Path(manager.task_index[name]["yaml_path"]) != tmp_path / "clash.yaml"
    assert Path(manager.task_index["lmms_eval_plugins_probe_task"]["yaml_path"]) == tmp_path / "ours.yaml"


def test_include_path_is_extended_once():
    ours = str(tasks_dir())
    assert discovery.with_plugin_tasks(None) == [ours]
    assert discovery.with_plugin_tasks("/x") == ["/x", ours]
    assert discovery.with_plugin_tasks(["/x", ours]) == ["/x", ours]


def test_register_installs_the_import_phase_hooks_once():
    from lmms_eval.tasks import TaskManager
    import lmms_eval.utils as lmms_utils

    discovery.register()
    patched_tasks, patched_table = TaskManager.initialize_tasks, lmms_utils.make_table
    assert getattr(patched_tasks, compat.MARK, False) and getattr(patched_table, compat.MARK, False)
    discovery.register()
    assert TaskManager.initialize_tasks is patched_tasks and lmms_utils.make_table is patched_table
