"""Benchmarks and LLM judges for lmms-eval: ErrorRadar, MMErroR, CrossVid, CausalStep, ViRectify."""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

PACKAGE_DIR = Path(__file__).resolve().parent

# pyproject maps the repo's top-level judges/ and task_yamls/ into this package at install time. When
# this folder is imported straight from a source checkout (e.g. `python -m ...` run in the repo root
# shadows the installed copy), look for those subpackages beside it too, so both behave the same.
_CHECKOUT = PACKAGE_DIR.parent
if (
    (_CHECKOUT / "pyproject.toml").is_file()
    and (_CHECKOUT / "judges" / "__init__.py").is_file()
    and not (PACKAGE_DIR / "judges").exists()
):
    __path__.append(str(_CHECKOUT))  # type: ignore[name-defined]


def tasks_dir() -> Path:
    """The folder holding our task YAMLs (installed as ``lmms_eval_plugins.task_yamls``)."""
    import lmms_eval_plugins.task_yamls as task_yamls

    return Path(next(iter(task_yamls.__path__))).resolve()
