"""The benchmarks this package adds, one sub-package each (spec, tasks, report section, sample data).

They register through the ``lmms_eval_plugins.benchmarks`` entry-point group like any third-party
benchmark; see :mod:`lmms_eval_plugins.benchmark` and docs/architecture.md.
"""
