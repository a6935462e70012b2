"""Issue 36: one writer.  No module of the plugin opens a file for writing except ``safe_files.py``.

An AST scan of every module under ``lmms_eval_plugins/`` and ``judges/`` finds each way Python opens,
creates or moves a file: ``open``/``io.open``/``Path.open``/``os.fdopen`` with a mode holding w, a, x
or +, ``write_text``, ``write_bytes``, ``os.open`` with write flags, ``tempfile.mkstemp``/
``NamedTemporaryFile``/``TemporaryFile``, ``os.replace``/``os.rename``/``Path.rename``/``Path.replace``,
``os.link``/``os.symlink`` and ``shutil`` copies and moves.  Each must go through
``lmms_eval_plugins.safe_files`` (which never follows a link), or be in ``ALLOWED`` below with the
reason; an ``ALLOWED`` entry that no longer matches anything fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("lmms_eval_plugins", "judges")
THE_WRITER = "lmms_eval_plugins/safe_files.py"

# (file, call as written) -> why it may write without safe_files.  Keep it short and justified.
ALLOWED: dict[tuple[str, str], str] = {
    ("lmms_eval_plugins/export.py", "shutil.copy2"): (
        "copies the task folder's non-Python files into the folder tempfile.mkdtemp just made (mode 0700, "
        "so nobody else can plant a link in it); the folder is then renamed into place by move_into_place"
    ),
}

_WRITE_MODE = set("wax+")
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
_ALWAYS = {  # calls that create, replace or move a file whatever their arguments
    "os.replace",
    "os.rename",
    "os.renames",
    "os.link",
    "os.symlink",
    "os.mkfifo",
    "tempfile.mkstemp",
    "tempfile.NamedTemporaryFile",
    "tempfile.TemporaryFile",
    "tempfile.SpooledTemporaryFile",
    "mkstemp",
    "NamedTemporaryFile",
    "TemporaryFile",
    "SpooledTemporaryFile",
    "shutil.copy",
    "shutil.copy2",
    "shutil.copyfile",
    "shutil.copytree",
    "shutil.move",
}
_ALWAYS_METHODS = {"write_text", "write_bytes", "symlink_to", "hardlink_to", "link_to"}


def _mode_writes(node: ast.expr | None) -> bool:
    """True when ``node`` (an open mode) may write: a constant holding w/a/x/+, or anything not a constant."""
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(_WRITE_MODE & set(node.value))
    return True  # a mode computed at run time: cannot show it only reads


def _flags_write(node: ast.expr) -> bool:
    names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if names & _WRITE_FLAGS:
        return True
    return not names <= {"os", "O_RDONLY", "O_NOFOLLOW", "O_CLOEXEC", "O_NONBLOCK", "O_DIRECTORY", "getattr"}


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def write_calls(source: str) -> list[tuple[int, str]]:
    """(line, call as written) of every call in ``source`` that may open a file for writing or move one."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)
    assigned: dict[str, list[ast.expr]] = {}  # flags held in a variable: judged by every value it is given
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(node.value)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = ast.unparse(func)
        method = func.attr if isinstance(func, ast.Attribute) else None
        writes = False
        if name in _ALWAYS or method in _ALWAYS_METHODS:
            writes = True
        elif name in ("open", "io.open", "builtins.open", "os.fdopen", "codecs.open"):
            mode = node.args[1] if len(node.args) > 1 else _keyword(node, "mode")
            writes = _mode_writes(mode)
        elif name == "os.open":
            flags = node.args[1] if len(node.args) > 1 else _keyword(node, "flags")
            values = assigned.get(flags.id, [flags]) if isinstance(flags, ast.Name) else [flags]
            writes = flags is None or any(_flags_write(value) for value in values)
        elif method == "open":  # Path.open(mode): other .open methods (Image.open, urllib openers) take no mode
            mode = node.args[0] if node.args else _keyword(node, "mode")
            writes = isinstance(mode, ast.Constant) and isinstance(mode.value, str) and _mode_writes(mode)
            writes = writes or (_keyword(node, "mode") is not None and _mode_writes(_keyword(node, "mode")))
        elif method in ("rename", "replace"):  # Path.rename(target) / Path.replace(target); str.replace takes 2
            writes = len(node.args) == 1 and not node.keywords
        if writes:
            found.append((node.lineno, name))
    return found


def _modules() -> list[Path]:
    return sorted(p for root in ROOTS for p in (REPO / root).rglob("*.py") if "_vendor" not in p.parts)


def _findings() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for path in _modules():
        rel = path.relative_to(REPO).as_posix()
        if rel == THE_WRITER:
            continue
        for line, name in write_calls(path.read_text(encoding="utf-8")):
            found.setdefault((rel, name), []).append(line)
    return found


def test_no_module_writes_a_file_outside_the_one_writer():
    found = _findings()
    stray = [
        f"{rel}:{line}: {name}(...)"
        for (rel, name), lines in sorted(found.items())
        if (rel, name) not in ALLOWED
        for line in lines
    ]
    assert not stray, (
        "these open a file for writing (or move one) without lmms_eval_plugins.safe_files, which never follows a "
        "link: use write_atomic / atomic_writer / open_append / write_new / move_into_place instead\n  "
        + "\n  ".join(stray)
    )


def test_every_allow_list_entry_is_still_needed():
    found = _findings()
    stale = [f"{rel}: {name}" for rel, name in ALLOWED if (rel, name) not in found]
    assert not stale, "ALLOWED entries that match no call any more (remove them): " + ", ".join(stale)


def test_the_writer_itself_is_scanned_and_exists():
    assert (REPO / THE_WRITER).is_file()
    assert write_calls((REPO / THE_WRITER).read_text(encoding="utf-8")), "the scan finds the writer's own opens"
    assert len(_modules()) > 50  # the scan sees the whole package, not an empty folder


@pytest.mark.parametrize(
    "code, flagged",
    [
        ('open(p, "w")', True),
        ('open(p, "rb")', False),
        ("open(p)", False),
        ('open(p, mode="a+")', True),
        ("open(p, m)", True),
        ('io.open(p, "x")', True),
        ('Path(p).open("ab")', True),
        ('Path(p).open(encoding="utf-8")', False),
        ('p.open(mode="r+")', True),
        ("Image.open(p)", False),
        ("self._opener.open(request, timeout=5)", False),
        ('p.write_text("x")', True),
        ('p.write_bytes(b"x")', True),
        ("os.open(p, os.O_RDONLY | os.O_NOFOLLOW)", False),
        ("os.open(p, os.O_WRONLY | os.O_CREAT, 0o600)", True),
        ("os.open(p, flags)", True),
        ("flags = os.O_RDONLY | os.O_NOFOLLOW\nos.open(p, flags)", False),
        ("flags = os.O_WRONLY | os.O_CREAT\nos.open(p, flags)", True),
        ("os.replace(a, b)", True),
        ("os.rename(a, b)", True),
        ("tmp.rename(target)", True),
        ("tmp.replace(target)", True),
        ('text.replace("a", "b")', False),
        ("df.rename(columns={})", False),
        ("tempfile.mkstemp(dir=d)", True),
        ("tempfile.NamedTemporaryFile(dir=d)", True),
        ("tempfile.mkdtemp(dir=d)", False),
        ("shutil.copy2(a, b)", True),
        ('os.fdopen(fd, "w")', True),
        ('os.fdopen(fd, "rb")', False),
        ("sqlite3.connect(path)", False),
    ],
)
def test_the_scan_by_hand(code, flagged):
    assert bool(write_calls(code)) is flagged


# ------------------------------------------------------------------------------ the writer itself, by hand


def test_write_atomic_refuses_a_link_and_leaves_no_temp_file(tmp_path):
    from lmms_eval_plugins.safe_files import UnsafePathError, write_atomic

    outside = tmp_path / "outside"
    outside.write_text("keep")
    (tmp_path / "report.json").symlink_to(outside)
    with pytest.raises(
        UnsafePathError, match="report.json is a symbolic link .*remove it; the plugin never writes through a link"
    ):
        write_atomic(tmp_path / "report.json", "{}")
    assert outside.read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == ["outside", "report.json"]
    (tmp_path / "fifo").mkdir()
    with pytest.raises(UnsafePathError, match="not a regular file"):
        write_atomic(tmp_path / "fifo", "x")
    assert write_atomic(tmp_path / "new.txt", "é", mode=0o600).read_bytes() == "é".encode()
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o600
    write_atomic(tmp_path / "new.txt", b"replaced")
    assert (tmp_path / "new.txt").read_bytes() == b"replaced"


def test_atomic_writer_removes_its_temp_file_on_error_and_keeps_the_old_file(tmp_path):
    from lmms_eval_plugins.safe_files import atomic_writer

    target = tmp_path / "state.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_writer(target) as out:
        out.write("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_open_append_refuses_links_and_write_new_creates_once(tmp_path):
    import os

    from lmms_eval_plugins.safe_files import (
        UnsafePathError,
        make_private,
        open_append,
        write_json_atomic,
        write_new,
    )

    outside = tmp_path / "outside"
    outside.write_text("keep")
    (tmp_path / "lock").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="lock is a symbolic link"):
        open_append(tmp_path / "lock")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(UnsafePathError):
        open_append(tmp_path / "dangling")
    assert not (tmp_path / "nowhere").exists() and outside.read_text() == "keep"
    with open_append(tmp_path / "log") as log:
        log.write("a\n")
    with open_append(tmp_path / "log") as log:
        log.write("b\n")
        log.seek(0)
        assert log.read() == "a\nb\n"
    assert (tmp_path / "log").stat().st_mode & 0o777 == 0o600
    assert write_new(tmp_path / "secret", "one") and not write_new(tmp_path / "secret", "two")
    assert (tmp_path / "secret").read_text() == "one"
    assert not write_new(tmp_path / "lock", "x") and outside.read_text() == "keep"  # a link counts as something
    with pytest.raises(ValueError):
        write_json_atomic(tmp_path / "n.json", {"x": float("nan")})
    (tmp_path / "db").write_text("")
    os.chmod(tmp_path / "db", 0o644)
    assert make_private(tmp_path / "db") and (tmp_path / "db").stat().st_mode & 0o777 == 0o600
    assert make_private(tmp_path / "fresh") and (tmp_path / "fresh").stat().st_mode & 0o777 == 0o600
    assert not make_private(tmp_path / "absent", create=False) and not (tmp_path / "absent").exists()
    with pytest.raises(UnsafePathError):
        make_private(tmp_path / "lock")


def test_stored_state_is_read_the_one_safe_way(tmp_path):
    import os

    import pytest

    from lmms_eval_plugins.safe_files import UnsafePathError, read_stored

    (tmp_path / "state").write_bytes(b"12345")
    assert read_stored(tmp_path / "state", 5)[0] == b"12345"
    with pytest.raises(ValueError, match="over 4 bytes"):
        read_stored(tmp_path / "state", 4)
    os.symlink(tmp_path / "state", tmp_path / "link")
    with pytest.raises(UnsafePathError, match="a symbolic link"):
        read_stored(tmp_path / "link", 5)
    (tmp_path / "folder").mkdir()
    with pytest.raises(UnsafePathError, match="not a regular file"):
        read_stored(tmp_path / "folder", 5)
    os.mkfifo(tmp_path / "fifo")  # planted: must neither block nor be read
    with pytest.raises(UnsafePathError, match="not a regular file"):
        read_stored(tmp_path / "fifo", 5)
