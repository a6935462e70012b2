"""``lmms-eval-plugins tasks`` and ``info`` point only at what an installed package has: a file of the
source repository that the wheel does not ship (docs/, tests/, bench/, top-level files) is named only
with the note that it is not installed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import lmms_eval_plugins
from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.benchmark import ordered_benchmarks
from lmms_eval_plugins.tasks_command import SOURCE_NOTE, mark_source_only

REPO = Path(__file__).resolve().parents[1]
# where each shipped top folder of the repository lives in the installed package (pyproject's package-dir)
SHIPPED = {
    "lmms_eval_plugins": Path(lmms_eval_plugins.__file__).parent,
    "task_yamls": tasks_dir(),
    "judges": Path(lmms_eval_plugins.__file__).parent / "judges",
}
_FOLDERS = "|".join(
    re.escape(p.name) for p in REPO.iterdir() if p.is_dir() and (not p.name.startswith(".") or p.name == ".ci")
)
_FILES = "|".join(re.escape(p.name) for p in REPO.iterdir() if p.is_file() and not p.name.startswith("."))
# a path from the repository's root (below a top folder, or a top-level file), or an upper-case *.md
PROJECT_PATH = re.compile(rf"(?<![\w./$-])(?:(?:{_FOLDERS})/[\w./-]*\w|{_FILES}|[A-Z][A-Z_]*\.md)(?![\w/-])`?")


def unshipped_mentions(text: str) -> list[str]:
    """Lines naming a file of this project that an installed package lacks, without the note."""
    bad = []
    for line in text.splitlines():
        for match in PROJECT_PATH.finditer(line):
            path = match.group(0).rstrip("`")
            top, _, rest = path.partition("/")
            if top in SHIPPED and (SHIPPED[top] / rest).exists():
                continue
            if not line[match.end() :].startswith(SOURCE_NOTE):
                bad.append(f"{path}: {line.strip()}")
    return bad


def test_the_check_tells_shipped_files_from_repository_only_ones():
    assert (
        unshipped_mentions(
            "see `lmms_eval_plugins/benchmarks/crossvid/sample_data.py` and task_yamls/crossvid/README.md"
        )
        == []
    )
    assert unshipped_mentions("see docs/judges.md") == ["docs/judges.md: see docs/judges.md"]
    assert unshipped_mentions("spec: `BENCHMARKS.md`, SECURITY.md, `lmms_eval_plugins/nope.py`") == [
        "BENCHMARKS.md: spec: `BENCHMARKS.md`, SECURITY.md, `lmms_eval_plugins/nope.py`",
        "SECURITY.md: spec: `BENCHMARKS.md`, SECURITY.md, `lmms_eval_plugins/nope.py`",
        "lmms_eval_plugins/nope.py: spec: `BENCHMARKS.md`, SECURITY.md, `lmms_eval_plugins/nope.py`",
    ]
    marked = mark_source_only("run `bench/b.py` (see docs/judges.md, SECURITY.md); `tests/data/x.jsonl`.")
    assert marked == (
        f"run `bench/b.py`{SOURCE_NOTE} (see docs/judges.md{SOURCE_NOTE}, SECURITY.md{SOURCE_NOTE}); "
        f"`tests/data/x.jsonl`{SOURCE_NOTE}."
    )
    assert unshipped_mentions(marked) == []
    assert (
        mark_source_only("$LMMS_EVAL_PLUGINS_DATA_ROOT/x/tests/a.json and eval/score_CCQA.py")
        == "$LMMS_EVAL_PLUGINS_DATA_ROOT/x/tests/a.json and eval/score_CCQA.py"
    )  # data layouts, other repositories


@pytest.mark.parametrize("argv", [["tasks"], *(["info", b.name] for b in ordered_benchmarks())], ids=" ".join)
def test_tasks_and_info_name_no_file_an_installed_package_lacks(argv):
    done = subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) > 10
    assert unshipped_mentions(done.stdout) == []
