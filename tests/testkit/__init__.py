"""The test kit (not in the wheel): helpers for the tests and benchmarks. ``task_utils``: a benchmark's
task code as lmms-eval loads it; ``report_fixtures``: regenerates the stored report runs
(``PYTHONPATH=tests python -m testkit.report_fixtures``). Shipped code never imports it
(``tests/test_layering.py``); bench scripts put ``tests/`` on ``sys.path`` first."""
