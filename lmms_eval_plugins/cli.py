"""``lmms-eval-plugins`` command: a thin dispatcher to the subcommands' own modules."""

from __future__ import annotations

import difflib
import importlib
import sys

# subcommand -> (module, one-line help). Each module exposes ``main(argv: list[str]) -> int``.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "lmms_eval_plugins.demo",
        "run the sample tasks with a tiny random Qwen2.5-VL on the CPU and print the table",
    ),
    "tiny-qwen": ("lmms_eval_plugins.tiny_qwen", "build a tiny randomly initialised Qwen2.5-VL into a folder"),
    "judge-agreement": (
        "lmms_eval_plugins.judges.agreement",
        "score a judge against human labels (agreement, Cohen's kappa)",
    ),
    "tasks": ("lmms_eval_plugins.tasks_command", "list installed benchmarks (data, judge) and their tasks"),
    "info": ("lmms_eval_plugins.tasks_command:info_main", "print the README of a task's benchmark"),
    "report": ("lmms_eval_plugins.report", "paper-style HTML/Markdown report from lmms-eval output folders"),
    "export-upstream": (
        "lmms_eval_plugins.export",
        "write a self-contained lmms_eval/tasks/<name>/ folder for upstreaming",
    ),
    "check-model": ("lmms_eval_plugins.check_model", "run every *_sample task with a model and report what breaks"),
    "compare": (
        "lmms_eval_plugins.compare",
        "paired differences B - A with 95% CIs and p-values for two runs' headline metrics",
    ),
    "new-benchmark": (
        "lmms_eval_plugins.scaffold",
        "write a pip-installable package for a new benchmark (spec, task YAMLs, sample data, tests)",
    ),
    "sync-yaml": (
        "lmms_eval_plugins.yaml_sync",
        "write (or --check) each task YAML's metric_list from its benchmark's spec",
    ),
    "sample-data": ("lmms_eval_plugins.sample_data", "regenerate the bundled sample data of installed benchmarks"),
    "check-run": (
        "lmms_eval_plugins.run_status",
        "exit 0 when the newest run in an --output_path folder wrote results and scored every sample, else 1",
    ),
    "doctor": (
        "lmms_eval_plugins.doctor",
        "check the install (versions, lmms-eval compatibility, decoder, cache, data, judge) in a few seconds",
    ),
    "judge-cache": (
        "lmms_eval_plugins.judges.cache:cli_main",
        "merge judge verdict caches from other machines, re-checking each row's signature",
    ),
    "score": (
        "lmms_eval_plugins.score",
        "finish or re-score a stored run without the model (judges only unscored samples)",
    ),
}


def did_you_mean(name: str) -> str:
    """ "; did you mean 'export-upstream'?" for a near miss or a command's first part, else ""."""
    close = [c for c in SUBCOMMANDS if c.startswith(f"{name}-") or c.split("-")[0] == name]
    close = close or difflib.get_close_matches(name, SUBCOMMANDS, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: lmms-eval-plugins COMMAND [ARGS...]\n\ncommands:")
        for name, (_module, help_text) in SUBCOMMANDS.items():
            print(f"  {name:<18} {help_text}")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(
            f"lmms-eval-plugins: unknown command {name!r}{did_you_mean(name)}; run 'lmms-eval-plugins --help'",
            file=sys.stderr,
        )
        return 2
    module_name, _, function = SUBCOMMANDS[name][0].partition(":")
    module = importlib.import_module(module_name)
    return int(getattr(module, function or "main")(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
