"""Benchmarks and LLM judges for lmms-eval: ErrorRadar, MMErroR, CrossVid, CausalStep, ViRectify."""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

PACKAGE_DIR = Path(__file__).resolve().parent


def tasks_dir() -> Path:
    """The folder holding our task YAMLs (installed as ``lmms_eval_plugins.task_yamls``)."""
    import lmms_eval_plugins.task_yamls as task_yamls

    return Path(next(iter(task_yamls.__path__))).resolve()
