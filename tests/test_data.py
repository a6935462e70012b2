"""The data layer's readers and path guard: errors name the file, the line and the fix."""

from __future__ import annotations

import pytest

from lmms_eval_plugins.data import hub_store, read_jsonl, safe_path
from lmms_eval_plugins.errors import DataError


def test_read_jsonl_skips_blank_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n', encoding="utf-8")
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize(
    "content, problem",
    [
        (b'{"a": 1}\n{"a": \n', "line 2: invalid JSON"),
        (b'{"a": 1}\n[1, 2]\n', "line 2: not a JSON object"),
        (b'{"a": "\xff"}\n', "cannot read"),  # not UTF-8: a clear error, not a UnicodeDecodeError
    ],
)
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


# ------------------------------------------------------------------------------ the containment rule (safe_path)


def _refused(root, value, **kw) -> DataError:
    with pytest.raises(DataError) as info:
        safe_path(root, value, record="rec-7", field="video", **kw)
    assert type(info.value) is DataError  # never a MediaError: LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA must not skip it
    text = str(info.value)
    # names the record, the field, the offending value and the root, with a fix
    assert "record: rec-7" in text and "video" in text and repr(value) in text and str(root) in text and "fix:" in text
    return info.value


@pytest.mark.parametrize(
    "value, problem",
    [
        ("..", "escapes"),
        ("../x.mp4", "escapes"),
        ("videos/../../x.mp4", "escapes"),
        ("videos/../videos/a.mp4", "escapes"),  # no '..' at all, even one that would come back inside
        ("/etc/passwd", "absolute"),
        ("//etc/passwd", "absolute"),
        ("C:/Windows/win.ini", "absolute"),
        ("..\\x.mp4", "backslash"),
        ("videos\\a.mp4", "backslash"),
        ("videos/a.mp4\0.png", "NUL"),
        ("", "empty"),
        ("   ", "empty"),
        (None, "not a string"),
        (3, "not a string"),
    ],
)
def test_data_paths_are_refused(tmp_path, value, problem):
    assert problem in _refused(tmp_path, value).problem


@pytest.mark.parametrize("value", ["a/b", "../x", "..", "a..b", "..\\x", "x\0", "/abs", ""])
def test_ids_used_as_file_names_are_one_plain_name(tmp_path, value):
    _refused(tmp_path, value, name=True, under="images", suffix=".png")


def test_an_id_used_as_a_file_name_resolves_under_its_folder(tmp_path):
    path = safe_path(tmp_path, "abc_01", record="r", field="question_id", name=True, under="images", suffix=".png")
    assert path == (tmp_path / "images" / "abc_01.png").resolve()


def test_paths_need_not_exist_and_come_back_real(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert (
        safe_path(tmp_path / "link", "./videos/a.mp4", record="r") == (tmp_path / "real" / "videos" / "a.mp4").resolve()
    )


def _tree(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "videos").mkdir(parents=True)
    (root / "store").mkdir()
    outside.mkdir()
    (root / "store" / "a.mp4").write_bytes(b"in")
    (outside / "a.mp4").write_bytes(b"out")
    return root, outside


def test_symbolic_links_inside_the_root_are_followed(tmp_path):
    root, _ = _tree(tmp_path)
    (root / "videos" / "file.mp4").symlink_to(root / "store" / "a.mp4")  # absolute target, inside
    (root / "videos" / "rel.mp4").symlink_to("../store/a.mp4")  # relative target, inside
    (root / "folder").symlink_to(root / "store", target_is_directory=True)
    for value in ("videos/file.mp4", "videos/rel.mp4", "folder/a.mp4", "folder"):
        path = safe_path(root, value, record="r")
        assert path.is_relative_to(root.resolve()) and "videos" not in path.parts and "folder" not in path.parts
    assert safe_path(root, "videos/file.mp4", record="r").read_bytes() == b"in"


@pytest.mark.parametrize(
    "make, value",
    [
        (lambda root, out: (root / "videos" / "a.mp4").symlink_to(out / "a.mp4"), "videos/a.mp4"),  # file, absolute
        (lambda root, out: (root / "videos" / "a.mp4").symlink_to("../../outside/a.mp4"), "videos/a.mp4"),  # relative
        (lambda root, out: (root / "uav").symlink_to(out, target_is_directory=True), "uav/a.mp4"),  # folder on the way
        (lambda root, out: (root / "uav").symlink_to(out, target_is_directory=True), "uav"),  # the folder itself
        (
            lambda root, out: (root / "videos" / "gone.mp4").symlink_to(out / "missing.mp4"),
            "videos/gone.mp4",
        ),  # dangling
        (
            lambda root, out: (root / "videos" / "up").symlink_to("../..", target_is_directory=True),
            "videos/up/outside/a.mp4",
        ),
    ],
)
def test_symbolic_links_out_of_the_root_are_refused(tmp_path, make, value):
    root, outside = _tree(tmp_path)
    make(root, outside)
    assert "escapes" in _refused(root, value).problem


def test_symbolic_link_loops_are_refused_or_stay_inside(tmp_path):
    root, _ = _tree(tmp_path)
    (root / "loop").symlink_to(root / "loop")
    path = safe_path(root, "loop", record="r")  # a loop never resolves out of the root
    assert path.is_relative_to(root.resolve())


def test_the_root_itself_may_be_a_link(tmp_path):
    root, _ = _tree(tmp_path)
    (tmp_path / "linked-root").symlink_to(root, target_is_directory=True)
    assert safe_path(tmp_path / "linked-root", "store/a.mp4", record="r").read_bytes() == b"in"


def test_within_widens_where_links_may_point_and_hub_store_finds_the_blobs(tmp_path):
    repo = tmp_path / "hub" / "datasets--o--n"
    snapshot, blobs = repo / "snapshots" / "abc123", repo / "blobs"
    (snapshot / "data").mkdir(parents=True)
    blobs.mkdir()
    (blobs / "f00d").write_bytes(b"blob")
    (snapshot / "data" / "x.png").symlink_to("../../../blobs/f00d")
    (tmp_path / "secret").write_bytes(b"secret")
    (snapshot / "data" / "evil.png").symlink_to(tmp_path / "secret")
    assert hub_store(snapshot) == repo and hub_store(tmp_path) == tmp_path
    _refused(snapshot, "data/x.png")  # the blob lies outside the snapshot folder itself
    assert safe_path(snapshot, "data/x.png", record="r", within=hub_store(snapshot)).read_bytes() == b"blob"
    _refused(snapshot, "data/evil.png", within=hub_store(snapshot))
    _refused(snapshot, "../../../secret", within=hub_store(snapshot))  # within never allows '..'


def test_a_json_file_that_is_not_utf8_is_a_named_data_error(tmp_path):
    from lmms_eval_plugins.data import read_json
    from lmms_eval_plugins.errors import DataError

    path = tmp_path / "qa.json"
    path.write_bytes(b'[{"question": "caf\xe9"}]')  # Latin-1, as an old export might write it
    with pytest.raises(DataError) as info:
        read_json(path)
    text = str(info.value)
    assert (
        "not UTF-8 text: byte 0xe9 at offset 18" in text and str(path) in text and "re-save the file as UTF-8" in text
    )


# ------------------------------------------------------------------------------ bounded JSON (issue 27)


@pytest.mark.parametrize(
    "text, value",
    [
        ("[" * 100 + "]" * 100, None),  # exactly at the limit: read
        ('["' + "[" * 500 + '"]', ["[" * 500]),  # brackets inside a string do not nest
        ('{"a": "\\"[[[["}', {"a": '"[[[['}),  # nor after an escaped quote
        ("9" * 308, int("9" * 308)),  # issue 36: the longest integer a float can still hold
    ],
)
def test_json_within_the_bounds_is_read(text, value):
    from lmms_eval_plugins.data import parse_json

    parsed = parse_json(text)
    assert value is None or parsed == value


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[" * 101 + "]" * 101, "JSON nested more than 100 levels deep"),
        ('{"a":' * 100_000 + "1" + "}" * 100_000, "JSON nested more than 100 levels deep"),  # a RecursionError before
        ("[" + "1" * 4301 + "]", "an integer of more than 4300 digits"),  # a bare ValueError before
    ],
)
def test_json_beyond_the_bounds_is_a_named_error_in_every_reader(tmp_path, text, problem):
    from lmms_eval_plugins.data import JsonLimitError, parse_json, read_json
    from lmms_eval_plugins.logged_samples import read_samples

    with pytest.raises(JsonLimitError, match=problem):
        parse_json(text)
    path = tmp_path / "data.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_json(path)
    assert info.value.problem == problem and info.value.path == str(path) and "restore it" in info.value.fix
    lines = tmp_path / "samples.jsonl"
    lines.write_text('{"doc_id": 0}\n{"doc_id": 1, "x": ' + text + "}\n", encoding="utf-8")
    for reader in (read_jsonl, read_samples):
        with pytest.raises(DataError) as info:
            reader(lines)
        assert info.value.problem == f"line 2: {problem}" and info.value.path == str(lines)


def test_a_doc_id_logged_twice_names_both_lines(tmp_path):
    from lmms_eval_plugins.logged_samples import DuplicateDocError, read_samples

    path = tmp_path / "s.jsonl"
    path.write_text('{"doc_id": 0}\n{"doc_id": "0"}\n{"doc_id": 1}\n\n{"doc_id": 0}\n', encoding="utf-8")
    with pytest.raises(DuplicateDocError) as info:  # "0" is another doc_id than 0; blank lines still count
        read_samples(path)
    assert info.value.problem == "line 5: doc_id 0 is logged twice (lines 1 and 5)" and info.value.path == str(path)
    path.write_text('{"doc_id": 0}\n{"doc_id": "0"}\n{"no_id": 1}\n{"no_id": 1}\n', encoding="utf-8")
    assert len(read_samples(path)) == 4  # records without a doc_id are the caller's to refuse


@pytest.mark.parametrize("task", ["a/b", "../x", "/abs/t.yaml", "a,b", "t*", ".hidden", "", "x" * 201, None])
def test_a_task_name_is_a_plain_name(tmp_path, task):
    from lmms_eval_plugins.logged_samples import check_task_name
    from lmms_eval_plugins.runs import samples_path

    with pytest.raises(DataError, match="is not a task name"):
        check_task_name(task, path=tmp_path / "r.json")
    if isinstance(task, str):
        with pytest.raises(DataError):
            samples_path(tmp_path / "r_results.json", task)
    assert check_task_name("mmerror_etc_sample", path=tmp_path) == "mmerror_etc_sample"


def test_an_overlong_file_name_from_the_data_is_a_named_error_not_an_oserror(tmp_path):
    name = "v" * 300 + ".mp4"  # OSError: File name too long at the first stat() before
    error = _refused(tmp_path, f"videos/{name}")
    assert "holds a name of 304 bytes; file systems allow 255" in error.problem
    assert safe_path(tmp_path, "v" * 251, record="r", suffix=".mp4").name == "v" * 251 + ".mp4"
    _refused(tmp_path, "v" * 252, suffix=".mp4")  # the suffix counts
