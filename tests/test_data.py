"""The data layer's readers and path guard: errors name the file, the line and the fix."""

from __future__ import annotations

import pytest

from lmms_eval_plugins.data import read_jsonl, safe_path
from lmms_eval_plugins.errors import DataError


def test_read_jsonl_skips_blank_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n', encoding="utf-8")
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize("content, problem", [
    (b'{"a": 1}\n{"a": \n', "line 2: invalid JSON"),
    (b'{"a": 1}\n[1, 2]\n', "line 2: not a JSON object"),
    (b'{"a": "\xff"}\n', "cannot read"),  # not UTF-8: a clear error, not a UnicodeDecodeError
])
def test_read_jsonl_errors_name_file_and_line(tmp_path, content, problem):
    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        read_jsonl(path)
    assert info.value.problem.startswith(problem) and str(path) in str(info.value) and "fix:" in str(info.value)


@pytest.mark.parametrize("relative", ["../outside.mp4", "/etc/passwd", "videos/../../x.mp4", ""])
def test_paths_cannot_escape_the_benchmark_folder(tmp_path, relative):
    with pytest.raises(DataError):
        safe_path(tmp_path, relative, record="r1")


def test_paths_inside_the_folder_resolve(tmp_path):
    assert safe_path(tmp_path, "videos/a.mp4", record="r1") == (tmp_path / "videos" / "a.mp4").resolve()
