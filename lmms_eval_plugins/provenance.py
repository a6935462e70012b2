"""What produced a run: versions of lmms-eval, this plugin (and its git commit when run from a checkout)
and the libraries that decide numbers. Stored in every results JSON and shown in the report's header.

lmms-eval's own ``lmms_eval_version`` is ``branch@commit`` of a git checkout, so a pip install writes
``unknown@unknown``; the installed distribution's version is what a reader needs.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

RESULTS_KEY = "lmms_eval_plugins_versions"
PACKAGES = ("lmms-eval", "lmms-eval-plugins", "transformers", "torch", "decord", "openai")


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def plugin_commit() -> str | None:
    """The short commit of the checkout this package runs from (an editable install), else None."""
    here = Path(__file__).resolve().parent
    if not (here.parent / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(here.parent), "rev-parse", "--short=10", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        dirty = subprocess.run(
            ["git", "-C", str(here.parent), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    if done.returncode != 0 or not commit:
        return None
    return commit + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


@functools.lru_cache(maxsize=1)
def software_versions() -> dict[str, str | None]:
    """{package: version or None}, plus ``lmms-eval-plugins commit`` and ``python``."""
    from lmms_eval_plugins import __version__

    found = {package: _version(package) for package in PACKAGES}
    found["lmms-eval-plugins"] = found["lmms-eval-plugins"] or __version__
    found["lmms-eval-plugins commit"] = plugin_commit()
    found["python"] = platform.python_version()
    return found


def describe(versions: dict[str, str | None] | None) -> str:
    """'lmms-eval 0.7.3 · lmms-eval-plugins 0.1.0 (abc1234)' from a stored versions dict ('' when none)."""
    if not versions:
        return ""
    plugin = versions.get("lmms-eval-plugins") or "?"
    commit = versions.get("lmms-eval-plugins commit")
    return f"lmms-eval {versions.get('lmms-eval') or '?'} · lmms-eval-plugins {plugin}" + (
        f" ({commit})" if commit else ""
    )
