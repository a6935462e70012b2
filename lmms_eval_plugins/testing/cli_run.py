"""Moved to :mod:`lmms_eval_plugins.cli_run` (``demo`` and ``check-model`` run the CLI with it, and shipped
code may not import this test kit); this name stays for the tests and benchmarks that import it."""

from __future__ import annotations

from lmms_eval_plugins.cli_run import (  # noqa: F401
    OFFLINE_ENV,
    RunResult,
    lmms_eval_command,
    run_lmms_eval,
)
from lmms_eval_plugins.runs import latest_results  # noqa: F401
