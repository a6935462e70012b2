"""Errors that tell the user which record or file is wrong and how to fix it."""

from __future__ import annotations


class PluginError(Exception):
    """Base class for errors raised by lmms-eval-plugins."""


class DataError(PluginError, ValueError):
    """A missing or malformed record, file or data folder.

    The message always names what is wrong (record id and/or file) and the fix.
    """

    def __init__(self, problem: str, *, record: str | None = None, path: str | None = None, fix: str | None = None):
        self.problem = problem
        self.record = record
        self.path = path
        self.fix = fix
        parts = [problem]
        if record is not None:
            parts.append(f"record: {record}")
        if path is not None:
            parts.append(f"file: {path}")
        if fix is not None:
            parts.append(f"fix: {fix}")
        super().__init__(" | ".join(parts))


class MediaError(DataError):
    """A video or image that cannot be found or decoded."""
