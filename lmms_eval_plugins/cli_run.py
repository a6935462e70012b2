"""Run the real ``lmms-eval`` CLI in a subprocess, offline, and read what it wrote.

Used by ``lmms-eval-plugins demo`` and ``check-model``, and by the tests. lmms-eval exits 0 even when a
task fails (it logs the error and moves on), so success is judged by the results JSON: a run "completed" only if every requested task
has an entry in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_eval_plugins.data import parse_json
from lmms_eval_plugins.logged_samples import read_samples, with_every_item
from lmms_eval_plugins.runs import latest_results, samples_path

# No hub access during tests and demos; our tasks read bundled data.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "WANDB_MODE": "disabled",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}


@dataclass
class RunResult:
    command: list[str]
    returncode: int
    output: str
    results_path: Path | None
    results: dict[str, Any] = field(default_factory=dict)

    def task_results(self, task: str) -> dict[str, Any]:
        """Metrics of one task with lmms-eval's ``,none`` filter suffix removed."""
        raw = self.results.get("results", {}).get(task)
        if raw is None:
            raise KeyError(f"task {task!r} has no results; lmms-eval output ends with:\n{self.tail()}")
        return {key.split(",")[0]: value for key, value in raw.items() if key != "alias"}

    def samples(self, task: str) -> list[dict[str, Any]]:
        """Logged samples of one task (needs ``log_samples=True``): FileNotFoundError when there are none,
        :class:`~lmms_eval_plugins.errors.DataError` (file and line) when the file is malformed."""
        assert self.results_path is not None
        path = samples_path(self.results_path, task)
        if not path.is_file():
            raise FileNotFoundError(f"no logged samples for {task} next to {self.results_path}")
        config = (self.results.get("configs") or {}).get(task) or {}
        metrics = [m.get("metric") for m in config.get("metric_list") or () if isinstance(m, dict)]
        return [with_every_item(record, metrics) for record in read_samples(path)]

    def tail(self, chars: int = 4000) -> str:
        return self.output[-chars:]


def lmms_eval_command(
    *,
    tasks: Sequence[str] | str,
    model: str,
    model_args: str | None,
    output_dir: Path,
    log_samples: bool = True,
    include_path: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "lmms_eval",
        "--model",
        model,
        "--tasks",
        tasks if isinstance(tasks, str) else ",".join(tasks),
        "--batch_size",
        "1",
        "--output_path",
        str(output_dir),
    ]
    if model_args:
        command += ["--model_args", model_args]
    if log_samples:
        command.append("--log_samples")
    if include_path:
        command += ["--include_path", include_path]
    return command + list(extra_args)


def run_lmms_eval(
    *,
    tasks: Sequence[str] | str,
    model: str,
    output_dir: Path,
    model_args: str | None = None,
    env: Mapping[str, str] | None = None,
    log_samples: bool = True,
    include_path: str | None = None,
    extra_args: Sequence[str] = (),
    timeout: float = 1800,
    stream: bool = False,
    launcher: Sequence[str] | None = None,
) -> RunResult:
    """Run lmms-eval once; ``launcher`` replaces ``python -m lmms_eval``'s interpreter prefix (e.g. accelerate).

    It runs in ``output_dir``: ``python -m`` puts the working directory first on ``sys.path``, and a source
    checkout there would shadow the installed package.
    """
    output_dir = Path(output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    include_path = str(Path(include_path).resolve()) if include_path else None
    command = lmms_eval_command(
        tasks=tasks,
        model=model,
        model_args=model_args,
        output_dir=output_dir,
        log_samples=log_samples,
        include_path=include_path,
        extra_args=extra_args,
    )
    if launcher:
        command = [*launcher, *command[1:]]
    full_env = {**os.environ, **OFFLINE_ENV, **(env or {})}
    before = latest_results(output_dir)
    if stream:
        completed = subprocess.run(command, env=full_env, timeout=timeout, cwd=output_dir)
        output = ""
    else:
        completed = subprocess.run(
            command,
            env=full_env,
            timeout=timeout,
            cwd=output_dir,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        output = completed.stdout
    after = latest_results(output_dir)
    results_path = after if after is not None and after != before else None
    results = parse_json(results_path.read_text(encoding="utf-8")) if results_path else {}
    return RunResult(command, completed.returncode, output, results_path, results)
