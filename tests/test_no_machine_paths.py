"""No file of the project names a path of one machine (a paper is cited by its title, a file by its
path in the repository): such a path means nothing on a user's machine."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The folder names are joined at run time, so this file does not name a machine path itself.
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:" + "|".join(("work", "home", "Users", "root")) + r")/[\w.-]+")


def test_the_pattern_finds_home_and_work_folders_only():
    sample = "from /" + "work/shared/papers and /" + "home/ana/x"
    assert MACHINE_PATH.findall(sample) == ["/" + "work/shared", "/" + "home/ana"]
    assert MACHINE_PATH.findall("/tmp/tiny-qwen, src/" + "work/x, https://h/" + "work/a") == []


def test_no_tracked_file_names_a_machine_path():
    try:
        files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    hits = []
    for name in filter(None, files):
        path = REPO / name.decode()
        if path.is_file() and path.suffix not in {".png", ".jpg", ".mp4", ".ttf"}:
            text = path.read_text(encoding="utf-8", errors="ignore")
            hits += [f"{name.decode()}: {m}" for m in MACHINE_PATH.findall(text)]
    assert hits == []
