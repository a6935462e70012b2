"""The one way the plugin writes a file: never through a link, never into a file it did not create.

A run folder, ``$TMPDIR`` and a copied cache folder can hold links planted by someone else, at the
final name or at any predictable temporary name.  So every write here goes into a temporary file
this process creates itself (``O_CREAT | O_EXCL | O_NOFOLLOW``, random name, same folder), is
fsynced, and is then renamed onto the target; ``rename`` replaces a link rather than following it,
and a link (or anything but a regular file) found at the target is refused before any byte is
written, as an :class:`UnsafePathError` that names the path.  Appends (lock files, logs, collect
files, resumable downloads) open with ``O_APPEND | O_NOFOLLOW`` and refuse a file owned by another
user.  ``tests/test_one_writer.py`` checks that no other module opens a file for writing.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "UnsafePathError",
    "atomic_writer",
    "make_private",
    "move_into_place",
    "open_append",
    "write_atomic",
    "write_json_atomic",
    "write_new",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted at the name must not block the open
_FIX = "remove it; the plugin never writes through a link"


class UnsafePathError(OSError):
    """A link, or something that is not a regular file owned by this user, where the plugin writes."""

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path} is {what}; {_FIX}")


def _refuse_unsafe(path: Path, *, owned: bool) -> os.stat_result | None:
    """The target's lstat (None when absent); a link, a non-regular file or (``owned``) another
    user's file is an :class:`UnsafePathError`."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(path, f"a symbolic link (to {os.readlink(path)!r})")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(path, "not a regular file")
    if owned and hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise UnsafePathError(path, f"owned by another user (uid {st.st_uid})")
    return st


def read_stored(path: str | os.PathLike[str], max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The bytes of a file the plugin stored (a secret, a state file) and its stat, read the one safe way:
    never through a link, never blocking on a FIFO, only a regular file, at most ``max_bytes`` (more is a
    ValueError).  A link or non-regular file is an :class:`UnsafePathError`; the caller checks the content."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except OSError:
        if os.path.islink(path):
            raise UnsafePathError(path, "a symbolic link") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # checked before fdopen, which refuses a folder with its own error
        os.close(fd)
        raise UnsafePathError(path, "not a regular file")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"over {max_bytes:,} bytes")
    return data, st


def _create_temp(folder: Path, name: str, mode: int) -> tuple[int, Path]:
    """A new file in ``folder`` that this process made (never an existing file, never a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(100):
        tmp = folder / f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:  # planted, or (1 in 2**64) taken: draw another name
            continue
    raise FileExistsError(f"could not create a temporary file in {folder}: 100 random names were taken")


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # not every file system fsyncs a folder; the data itself is already synced
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_writer(
    path: str | os.PathLike[str],
    *,
    mode: int = 0o644,
    binary: bool = False,
    encoding: str = "utf-8",
    newline: str | None = None,
) -> Iterator[IO[Any]]:
    """Yield a temporary file (text, or bytes when ``binary``) that replaces ``path`` on success and
    is removed on error.  A link or non-regular file at ``path`` is refused before anything is written."""
    target = Path(path)
    _refuse_unsafe(target, owned=False)
    fd, tmp = _create_temp(target.parent, target.name, mode)
    try:
        handle = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding=encoding, newline=newline)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        _refuse_unsafe(target, owned=False)  # planted while we wrote: rename would replace it, but say so
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(target.parent)


def write_atomic(
    path: str | os.PathLike[str], data: str | bytes, *, mode: int = 0o644, encoding: str = "utf-8"
) -> Path:
    """Write ``data`` to ``path`` through a temporary file this process creates, then rename it into
    place.  ``mode`` is the new file's mode (before the umask).  Returns ``path``."""
    target = Path(path)
    with atomic_writer(target, mode=mode, binary=True) as handle:
        handle.write(data.encode(encoding) if isinstance(data, str) else bytes(data))
    return target


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, mode: int = 0o644, indent: int | None = None) -> Path:
    """``obj`` as strict JSON (no NaN or Infinity), newline-terminated, written by :func:`write_atomic`."""
    return write_atomic(path, json.dumps(obj, indent=indent, allow_nan=False) + "\n", mode=mode)


def open_append(
    path: str | os.PathLike[str], *, mode: int = 0o600, binary: bool = False, encoding: str = "utf-8"
) -> IO[Any]:
    """Open ``path`` for appending (and reading: lock files read their holder's pid), creating it
    with ``mode`` when absent.  A link, a non-regular file, or a file owned by another user is an
    :class:`UnsafePathError`: nothing is opened, created or changed."""
    target = Path(path)
    _refuse_unsafe(target, owned=True)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC | _NONBLOCK
    try:
        fd = os.open(target, flags, mode)
    except OSError as exc:
        if os.path.islink(target):  # planted between the check and the open (ELOOP)
            raise UnsafePathError(target, "a symbolic link") from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(target, "not a regular file")
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise UnsafePathError(target, f"owned by another user (uid {st.st_uid})")
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "a+b") if binary else os.fdopen(fd, "a+", encoding=encoding)
    except BaseException:
        os.close(fd)
        raise


def move_into_place(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Rename ``source`` (a file or folder this process made, or a damaged file set aside) onto
    ``target``; a link at ``target`` is refused (a rename would replace it, never follow it, but
    someone planted it)."""
    dest = Path(target)
    if os.path.islink(dest):
        raise UnsafePathError(dest, f"a symbolic link (to {os.readlink(dest)!r})")
    os.replace(source, dest)
    return dest


def write_new(path: str | os.PathLike[str], data: str | bytes, *, mode: int = 0o600, encoding: str = "utf-8") -> bool:
    """Create ``path`` holding ``data`` only if nothing is there (a link counts as something): the
    complete file appears at once (a temporary file, then ``link``), so concurrent processes end up
    with one file.  True when this call created it, False when it existed."""
    blob = data.encode(encoding) if isinstance(data, str) else bytes(data)
    return _publish_new(Path(path), mode, lambda handle: handle.write(blob))


def copy_new(source: str | os.PathLike[str], path: str | os.PathLike[str], *, mode: int = 0o644) -> bool:
    """:func:`write_new` with the bytes of ``source``, streamed (a large samples file is never held in memory)."""

    def copy(handle: IO[bytes]) -> None:
        with open(source, "rb") as src:
            while chunk := src.read(1 << 20):
                handle.write(chunk)

    return _publish_new(Path(path), mode, copy)


def _publish_new(target: Path, mode: int, fill: Any) -> bool:
    fd, tmp = _create_temp(target.parent, target.name, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, target, follow_symlinks=False)  # never replaces: fails if another process made it first
        except FileExistsError:
            return False
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_folder(target.parent)
    return True


def new_link(link: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """A new symbolic link ``link`` -> ``target`` (an alias the plugin names, e.g. a comma-free path for
    lmms-eval's ``--model_args``); something already at ``link`` is a FileExistsError, never replaced."""
    os.symlink(target, link, target_is_directory=Path(target).is_dir())
    return Path(link)


def make_private(path: str | os.PathLike[str], *, create: bool = True) -> bool:
    """Make ``path`` readable by this user only (group and other bits cleared), creating it empty
    with mode 0600 when absent and ``create`` (e.g. before SQLite creates a database, whose -wal and
    -shm then get the same mode).  A link or a non-regular file is an :class:`UnsafePathError`; a
    file of another user is left as it is (only its owner can change its mode).  True when it exists."""
    target = Path(path)
    st = _refuse_unsafe(target, owned=False)
    if st is None:
        if not create:
            return False
        try:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600))
        except FileExistsError:  # made meanwhile by another process: check what is there now
            return make_private(target, create=False)
        return True
    if stat.S_IMODE(st.st_mode) & 0o077 and (not hasattr(os, "getuid") or st.st_uid == os.getuid()):
        fd = os.open(target, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK)
        try:
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise UnsafePathError(target, "replaced while its mode was being checked")
            os.fchmod(fd, stat.S_IMODE(now.st_mode) & 0o700)
        finally:
            os.close(fd)
    return True
