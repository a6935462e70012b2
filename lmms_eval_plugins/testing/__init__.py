"""The test kit: helpers for the tests and benchmarks (``task_utils``, ``report_fixtures``) and the old
names of modules that moved into the package (``cli_run``, ``tiny_qwen``). Shipped code never imports
it (``tests/test_layering.py``)."""
