"""Layering: shipped code never depends on the test kit, and the layers share one core.

The test kit lives in ``tests/testkit/`` (imported as ``testkit``; not in the wheel). Every shipped module is parsed with ``ast`` (nothing is imported): the
package itself, ``judges/`` (installed as ``lmms_eval_plugins.judges``) and the task folders'
Python files (``task_yamls/``, installed as ``lmms_eval_plugins.task_yamls``). An import of the test
kit anywhere in them (at the top or inside a function, absolute or relative), or a module path
string naming it (``importlib.import_module`` targets such as the CLI's subcommand table), fails.

The shared pieces every layer uses instead of its own copy are pinned at the end: the JSONL reader
(``data.iter_jsonl``), the logged-samples reader (``logged_samples``), the filtered-response dict
(``filtered.FilteredDict``) and the chat message builder (``messages``).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEST_KIT = "testkit"
OLD_TEST_KIT = "lmms_eval_plugins.testing"  # where it lived before it left the wheel
# source folder -> the package it installs as
SHIPPED = {
    REPO / "lmms_eval_plugins": "lmms_eval_plugins",
    REPO / "judges": "lmms_eval_plugins.judges",
    REPO / "task_yamls": "lmms_eval_plugins.task_yamls",
}
_MODULE_PATH = re.compile(r"[A-Za-z_][\w.]*(:\w+)?")


def shipped_modules() -> list[tuple[Path, str]]:
    """(file, dotted name of the package it is in) for every shipped Python file."""
    found = []
    for folder, package in SHIPPED.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder)
            if "__pycache__" in rel.parts:
                continue
            found.append((path, ".".join([package, *rel.parts[:-1]])))
    return found


def _is_test_kit(name: str) -> bool:
    return any(name == kit or name.startswith(kit + ".") for kit in (TEST_KIT, OLD_TEST_KIT))


def kit_references(path: Path, package: str) -> list[str]:
    """What in ``path`` names the test kit: ``line N: import X`` / ``line N: string 'X'``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the file's package
                parts = package.split(".")
                parent = parts[: len(parts) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_PATH.fullmatch(node.value):
            if _is_test_kit(node.value.partition(":")[0]):
                found.append(f"line {node.lineno}: string {node.value!r}")
            continue
        hit = next((name for name in names if _is_test_kit(name)), None)
        if hit is not None:
            found.append(f"line {node.lineno}: import {hit}")
    return sorted(found, key=lambda text: int(text.split(":")[0].split()[1]))


def test_every_shipped_folder_is_scanned():
    files = {path.relative_to(REPO).as_posix() for path, _ in shipped_modules()}
    for expected in (
        "lmms_eval_plugins/check_model.py",
        "lmms_eval_plugins/demo.py",
        "lmms_eval_plugins/cli.py",
        "lmms_eval_plugins/models/replay.py",
        "judges/filter.py",
    ):
        assert expected in files
    assert not (REPO / "lmms_eval_plugins" / "testing").exists()  # the test kit is not shipped
    assert (REPO / "tests" / "testkit" / "task_utils.py").is_file()


@pytest.mark.parametrize(
    "path, package", shipped_modules(), ids=lambda v: v.relative_to(REPO).as_posix() if isinstance(v, Path) else ""
)
def test_shipped_code_does_not_import_the_test_kit(path, package):
    assert kit_references(path, package) == [], f"{path.relative_to(REPO)} depends on {TEST_KIT}"


def test_the_check_catches_every_form(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "import lmms_eval_plugins.testing.cli_run\n"
        "from lmms_eval_plugins.testing import tiny_qwen\n"
        "from lmms_eval_plugins import testing\n"
        "def f():\n"
        "    from ..testing.cli_run import run_lmms_eval\n"
        "COMMANDS = {'x': ('lmms_eval_plugins.testing.tiny_qwen', 'help')}\n"
        "DOC = 'see lmms_eval_plugins.testing.tiny_qwen for details'\n"  # prose, not a module path
        "from lmms_eval_plugins import testing_helpers\n"  # another module whose name starts alike
        "import testkit.task_utils\n",
        encoding="utf-8",
    )
    found = kit_references(path, "lmms_eval_plugins.judges")
    assert [line.split(":")[0] for line in found] == ["line 1", "line 2", "line 3", "line 5", "line 6", "line 9"]


# ------------------------------------------------------------------------------------------------ the shared core


def test_one_jsonl_reader_numbers_lines_and_keeps_raw_line_separators_inside_strings(tmp_path):
    from lmms_eval_plugins.data import JsonlLineError, iter_jsonl, read_jsonl

    path = tmp_path / "s.jsonl"
    # lmms-eval writes samples with ensure_ascii=False: U+2028, U+2029 and U+0085 stay raw inside strings
    reply = "a\u2028b\u2029c\x85d"
    path.write_text(json.dumps({"r": reply}, ensure_ascii=False) + "\n\n" + '{"r": 2}\r\n' + "[1]\n", encoding="utf-8")
    records = iter_jsonl(path)
    assert next(records) == (1, {"r": reply})
    assert next(records) == (3, {"r": 2})  # blank lines count; a CRLF ending is fine
    with pytest.raises(JsonlLineError) as info:  # raised when reached, after the good lines
        next(records)
    assert (info.value.line, info.value.json_error) == (4, None) and info.value.problem == "line 4: not a JSON object"
    path.write_text('{"r": 1}\n{"r": ', encoding="utf-8")  # a torn last line is an error, never skipped
    with pytest.raises(JsonlLineError, match="line 2: invalid JSON") as info:
        read_jsonl(path)
    assert info.value.json_error and str(path) in str(info.value)


def test_one_logged_samples_reader(tmp_path):
    from lmms_eval_plugins import logged_samples, runs

    results = tmp_path / "2026-01-01T00-00-00.1_results.json"
    assert runs.samples_path(results, "t") == tmp_path / "2026-01-01T00-00-00.1_samples_t.jsonl"
    assert runs.samples_path(tmp_path / "run.json", "t") == tmp_path / "run_samples_t.jsonl"
    for task in ("b", "a"):
        runs.samples_path(results, task).write_text('{"doc_id": 0}\n', encoding="utf-8")
    (tmp_path / "other_samples_c.jsonl").write_text("", encoding="utf-8")  # another run's
    assert [p.name for p in runs.samples_files(results)] == [
        "2026-01-01T00-00-00.1_samples_a.jsonl",
        "2026-01-01T00-00-00.1_samples_b.jsonl",
    ]
    assert logged_samples.read_samples(runs.samples_path(results, "a")) == [{"doc_id": 0}]


def test_one_filtered_dict_for_every_filter_attachment():
    from lmms_eval_plugins.filtered import FilteredDict
    from lmms_eval_plugins.judges.filter import JudgedResponse
    from lmms_eval_plugins.benchmarks.causalstep.chain_filter import GroupAttachment

    for cls in (JudgedResponse, GroupAttachment):
        value = cls(text="é", n=1)
        assert isinstance(value, FilteredDict) and value == {"text": "é", "n": 1}
        assert value.strip() is value and value.strip(" ") is value  # lmms-eval strips filtered responses
        assert json.loads(str(value)) == value and "é" in str(value)  # its sample log str()s them
    assert JudgedResponse(text="x", judge={}).text == "x"


def test_one_message_builder_for_images_and_videos():
    from lmms_eval_plugins.messages import FrameGroup, interleaved_messages

    frames = ["f1", "f2"]  # stand-ins for PIL images
    assert interleaved_messages("Look:", [FrameGroup("", frames[:1], kind="image")], " Answer.") == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image", "url": "f1"},
                {"type": "text", "text": " Answer."},
            ],
        }
    ]
    content = interleaved_messages("", [FrameGroup("[0s]", frames, kind="image"), FrameGroup("Clip:", frames)], "Q")[0][
        "content"
    ]
    assert [item["type"] for item in content] == ["text", "image", "image", "text", "video", "text"]
    with pytest.raises(ValueError, match="kind"):
        FrameGroup("x", frames, kind="audio")


def argv_reads(source: str) -> list[int]:
    """Lines that read ``sys.argv`` outside a command's main function (``main``, ``*_main``) or the
    ``if __name__ == "__main__":`` block."""
    tree = ast.parse(source)
    allowed: set[int] = set()
    for node in ast.walk(tree):
        is_main_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            node.name == "main" or node.name.endswith("_main")
        )
        is_main_block = (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
        )
        if is_main_function or is_main_block:
            allowed |= {n.lineno for n in ast.walk(node) if hasattr(n, "lineno")}
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "argv"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
        and node.lineno not in allowed
    ]


def test_only_a_commands_main_reads_the_command_line():
    # a library module that reads sys.argv guesses at a run it is not told about (issue 38); the
    # compat layer reads lmms-eval's command line once per run and hands what it found to the run's state
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for path, _ in shipped_modules()
        if "compat" not in path.relative_to(REPO).parts
        for line in argv_reads(path.read_text(encoding="utf-8"))
    ]
    assert found == []
    assert argv_reads("import sys\ndef helper():\n    return sys.argv\n") == [3]
    assert argv_reads("import sys\ndef main():\n    return sys.argv\nif __name__ == '__main__':\n    sys.argv\n") == []
