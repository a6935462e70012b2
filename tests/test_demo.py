"""``lmms-eval-plugins demo``: the README's first command, end to end (one lmms-eval process, three models)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lmms_eval_plugins import demo

pytestmark = pytest.mark.cli


def test_headline_is_the_first_percent_metric_of_the_spec():
    metrics = {"alias": "x", "step_parse_fail,none": 3, "step_acc,none": 40.0, "step_acc_stderr,none": 5.0}
    assert demo.headline("errorradar_step_sample", metrics) == ("step_acc", 40.0)
    assert demo.headline("not_ours", metrics) == ("", None)


def test_demo_prints_the_tiny_model_beside_oracle_and_random(tmp_path, isolated_env):
    done = subprocess.run([sys.executable, "-m", "lmms_eval_plugins.cli", "demo", "--output_path", str(tmp_path / "demo"),
                           "--tasks", "errorradar_sample,mmerror_sample,causalstep_sample"],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("task "))
    assert lines[header].split()[-3:] == ["Qwen2.5-VL", "oracle", "random"]
    rows = {line.split()[0]: line.split() for line in lines[header + 2:] if line.strip() and not line.startswith(" ")
            and "_sample" in line.split()[0]}
    assert {"errorradar_step_sample", "errorradar_cate_sample", "mmerror_etc_sample", "mmerror_epd_sample",
            "causalstep_sample"} <= set(rows)
    for task, cells in rows.items():
        tiny, oracle, random = cells[-3:]
        assert oracle == "100.0", (task, cells)  # every headline is a percent whose maximum is 100
        assert float(tiny) <= 100.0 and float(random) <= 100.0
    assert "random weights" in done.stdout and "near the random row" in done.stdout
