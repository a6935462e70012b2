"""ruff is the formatter and the linter (pyproject.toml, [tool.ruff]): the suite fails when either would
change or flag a shipped or test file (issue 38). Fix with `ruff format` and `ruff check --fix`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("lmms_eval_plugins", "judges", "task_yamls", "tests", "bench")


def _ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")  # the venv's, installed by the dev extra
    found = str(beside) if beside.is_file() else shutil.which("ruff")
    assert found, "ruff is not installed: pip install -c constraints.txt '.[dev]'"
    return [found]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_passes(command):
    done = subprocess.run([*_ruff(), *command, *FOLDERS], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
