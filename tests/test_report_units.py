"""The report's numbers by unit, its dates in UTC, its error bars read from the results, and the layout of
the run reader and the report package (issues 28 and 29). Hand-computed cases; one CLI call on a stored run."""

from __future__ import annotations

import ast
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lmms_eval_plugins import report, runs
from lmms_eval_plugins.report import formatting
from testkit.report_fixtures import html_table_rows

REPO = Path(__file__).resolve().parents[1]
STORED = REPO / "tests" / "data" / "report_runs"


# ----------------------------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (12.3456, "%", "12.35"),
        (7.0, "%", "7.00"),
        (-0.004, "%", "-0.00"),
        (0.123456, "fraction", "0.1235"),
        (1, "fraction", "1.0000"),
        (3.0, "count", "3"),
        (0.0, "count", "0"),
        (2.5, "count", "2.50"),  # a mean of counts keeps decimals
        (7, "%", "7"),
        (7, None, "7"),  # an int is a count whatever the spec says (CausalStep's MCL)
        (33.333333, None, "33.33"),  # unknown unit: a float is a percentage
        (None, "%", "N/A"),
        (True, None, "yes"),
        (float("nan"), "%", "nan"),
        ([], None, "—"),
        ("text", "%", "text"),
    ],
)
def test_one_format_per_unit(value, unit, text):
    assert report.fmt(value, unit) == text


def test_each_unit_has_its_own_function():
    assert (formatting.fmt_percent(1 / 3), formatting.fmt_fraction(1 / 3), formatting.fmt_count(4.0)) == (
        "0.33",
        "0.3333",
        "4",
    )
    assert formatting.UNIT_FORMATS == {
        "%": formatting.fmt_percent,
        "fraction": formatting.fmt_fraction,
        "count": formatting.fmt_count,
    }


# ----------------------------------------------------------------------------------------------- dates


def test_lmms_eval_dates_are_shown_in_utc():
    # lmms-eval 0.7.3 writes results["date"] in Asia/Singapore (UTC+8) unless --timezone says otherwise
    assert formatting.run_date_utc("20261126_024924", "Asia/Singapore") == "2026-11-25 18:49:24 UTC"
    assert formatting.run_date_utc("20260701_120000", "America/New_York") == "2026-07-01 16:00:00 UTC"  # EDT
    assert formatting.run_date_utc("20260101_000000", "UTC") == "2026-01-01 00:00:00 UTC"
    # as recorded, its zone named, when it cannot be converted
    assert formatting.run_date_utc("20250102_000000b", "Asia/Singapore") == "20250102_000000b (Asia/Singapore)"
    assert formatting.run_date_utc("20260101_000000", "No/Such_Zone") == "20260101_000000 (No/Such_Zone)"
    assert formatting.run_date_utc(None, "UTC") == "N/A"
    moment = dt.datetime(2026, 11, 25, 18, 52, 7, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert formatting.utc_text(moment) == "2026-11-25 23:52:07 UTC"


def test_the_zone_of_a_run_is_its_timezone_option_else_lmms_evals_default():
    assert runs.results_timezone({"config": {"resolved_cli_args": {"timezone": "Europe/Paris"}}}) == "Europe/Paris"
    assert runs.results_timezone({"config": {}}) == runs.LMMS_EVAL_DEFAULT_TIMEZONE == "Asia/Singapore"


# ----------------------------------------------------------------------------------------------- error bars


RAW = {
    "alias": "t",
    "acc,none": 50.0,
    "acc_stderr,none": 5.0,
    "acc_stderr_clt,none": 0.05,
    "acc_stderr_clustered,none": 0.06,
    "n,none": 3,
    "n_stderr,none": "N/A",
    "acc,strict": 1.0,
    "acc_stderr,strict": 9.0,
    "by_x,none": {"a": 1},
    "by_x_stderr,none": "N/A",
}


def test_error_bars_are_read_with_the_metrics_not_dropped():
    assert runs.task_metrics(RAW) == {"acc": 50.0, "n": 3, "by_x": {"a": 1}}  # the none filter wins
    assert runs.task_error_bars(RAW) == {"acc": {"stderr": 5.0, "stderr_clt": 0.05, "stderr_clustered": 0.06}}


def _results_file(folder: Path, results: dict, **top) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "20261126_024924_results.json"
    path.write_text(
        json.dumps({"results": results, "config": {"model": "m", "model_args": ""}, "date": "20261126_024924", **top}),
        encoding="utf-8",
    )
    return path


def test_the_error_bar_table_shows_every_stderr_ci_and_mde_of_the_results(tmp_path):
    task = "errorradar_step_sample"
    _results_file(
        tmp_path / "run",
        {
            task: {
                "alias": task,
                "step_acc,none": 40.0,
                "step_acc_stderr,none": 10.0,
                "step_acc_stderr_clt,none": 0.1,
                "step_parse_fail,none": 2.0,
                "step_parse_fail_stderr,none": 0.5,
            }
        },
        # the stored percentile interval (hostile or broken entries are left out, never shown)
        lmms_eval_plugins_intervals={
            task: {"step_acc,none": [25.0, 60.0], "step_parse_fail,none": [3, 1], "x,none": ["a", 1]}
        },
    )
    (run,) = runs.discover_runs(tmp_path / "run")
    assert run.tasks[task].stderr("step_acc") == 10.0 and run.tasks[task].stderr("step_acc", "stderr_clt") == 0.1
    assert run.tasks[task].intervals == {"step_acc": (25.0, 60.0)}
    out = tmp_path / "out"
    assert report.main([str(tmp_path / "run"), "-o", str(out), "--no-plots"]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    (row,) = html_table_rows(page, "errorradar-errorbars")  # a count has no error bar, even one lmms-eval computed
    # the CI is the run's own percentile interval, never value ± 1.96 SE (issue 37: that one left [0, 100]);
    # MDE (1.959964 + 0.841621) * 10 * sqrt 2 = 39.62
    assert row == {
        "model": "m",
        "task": task,
        "metric": "STEP acc",
        "value": "40.00",
        "stderr": "10.00",
        "95% CI": "[25.00, 60.00]",
        "MDE": "39.62",
    }
    assert "<details open><summary>Error bars</summary>" in page  # visible without a click
    assert "<details open><summary>Error bars</summary>" in (out / "report.md").read_text(encoding="utf-8")
    # a count is an integer in every table, even when lmms-eval stored it as a float
    (every,) = [r for r in html_table_rows(page, f"all-{task}") if r["model"] == "step_parse_fail"]
    assert every["m"] == "2"


def test_a_default_section_prints_each_metric_in_its_unit(tmp_path):
    from lmms_eval_plugins.benchmark import Benchmark, Metric
    from lmms_eval_plugins.report.document import Entry
    from lmms_eval_plugins.report.sections import Builder, default_section

    metrics = (Metric("acc", True), Metric("agree", True, unit="fraction"), Metric("fails", False, unit="count"))
    spec = Benchmark("toy", "Toy", "a toy benchmark", tmp_path, {"toy.yaml": metrics})
    # the core ends the list with the run-wide counts (a run always reports them)
    values = {"acc": 50.0, "agree": 0.5, "fails": 3.0, "skipped": 0.0, "unscored": 0.0}
    result = runs.TaskResult("toy_sample", values, tmp_path / "r_results.json")
    run = runs.Run("m", tmp_path, "m", "", [], {"toy_sample": result})
    section = default_section(Builder([run], plots=False), [Entry(run, "sample", {None: result}, "m")], spec)
    (table,) = [block for block in section.blocks if isinstance(block, report.Table)]
    assert table.rows == [("m", ["50.00", "0.5000", "3", "0", "0"])]


def _row(metric: str, method: str, diff: float, ci: tuple[float, float] | None, p: float | None, note: str = ""):
    from lmms_eval_plugins.compare import Row

    low, high = ci if ci else (None, None)
    return Row(
        a=90.0,
        b=90.0 + diff,
        diff=diff,
        ci_low=low,
        ci_high=high,
        p_value=p,
        n=10,
        method=method,
        units=10,
        resamples=1000 if p is not None else 0,
        note=note,
        task="errorradar_cate_sample",
        metric=metric,
    )


def test_the_paired_table_shows_each_rows_one_method_and_its_note():
    from lmms_eval_plugins.benchmark import benchmark_of_task
    from lmms_eval_plugins.report.sections import paired_table

    spec = benchmark_of_task("errorradar_cate_sample")
    base, other = (runs.Run(label, Path(label), label, "", [], {}) for label in ("a", "b"))
    few = "3 independent unit(s): no interval below 6"
    rows = [
        _row("cate_acc", "paired bootstrap", -8.0, (-12.0, -2.5), 0.004),
        _row("cate_macro_f1", "paired bootstrap", -80.0, (-100.0, -50.0), 0.0),  # no resample crossed 0
        _row("cate_f1_vis", "paired cluster bootstrap by id", 3.0, (-1.0, 7.0), 0.31),
        _row("cate_f1_cal", "paired cluster bootstrap by id", 5.0, None, None, few),
        _row("cate_f1_know", "paired cluster bootstrap by id", 6.0, None, None, few),
    ]
    table = paired_table(spec, base, [(other, rows)], ["errorradar_cate_sample"])
    assert [c.name for c in table.columns] == ["task", "metric", "diff", "95% CI", "p", "paired items", "method"]
    assert [cells[2:] for _, cells in table.rows] == [
        ["-8.00 *", "[-12.00, -2.50]", "0.004", "10", "paired bootstrap"],
        ["-80.00 *", "[-100.00, -50.00]", "<0.002", "10", "paired bootstrap"],  # a p of 0, never "0.000"
        ["3.00", "[-1.00, 7.00]", "0.310", "10", "paired cluster bootstrap by id"],
        ["5.00", ("—", "note 1"), "—", "10", "paired cluster bootstrap by id"],
        ["6.00", ("—", "note 1"), "—", "10", "paired cluster bootstrap by id"],
    ]
    assert table.note.endswith(f"'—': no interval: note 1: {few}.")  # each note written once
    # one method for every row: a caption, not a column
    (only,) = paired_table(spec, base, [(other, rows[:1])], ["errorradar_cate_sample"]).rows
    assert (
        only[1][-2:] == ["0.004", "10"]
        and "Method: paired bootstrap."
        in paired_table(spec, base, [(other, rows[:2])], ["errorradar_cate_sample"]).note
    )
    assert paired_table(spec, base, [(other, rows)], ["mmerror_epd_sample"]) is None  # another benchmark's task


# ----------------------------------------------------------------------------------------------- through the CLI


def _md_paired_rows(md: str) -> dict[str, tuple[list[dict[str, str]], str]]:
    """table id -> (rows as column -> cell, caption) of every paired-differences table in report.md."""
    import html

    out = {}
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if not (line.startswith("<!-- table: ") and line.rstrip().endswith("-paired -->")):
            continue
        j = next(k for k in range(i, len(lines)) if lines[k].startswith("| "))
        header = [c.strip() for c in lines[j].strip("|").split("|")]
        rows, k = [], j + 2
        while lines[k].startswith("|"):
            rows.append(dict(zip(header, (html.unescape(c.strip()) for c in lines[k].strip("|").split("|")))))
            k += 1
        out[line.split()[2]] = (rows, html.unescape(lines[k + 1]))
    return out


@pytest.mark.cli
def test_report_command_shows_dates_in_utc_and_paired_rows_that_agree(tmp_path):
    """The stored oracle and random runs (lmms-eval date 20261122_143442, Asia/Singapore) through
    `lmms-eval-plugins report`: dates in UTC; each paired row's star, p and CI from its one method."""
    cli = Path(sys.executable).parent / "lmms-eval-plugins"
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    done = subprocess.run(
        [str(cli), "report", str(STORED / "oracle"), str(STORED / "random"), "-o", str(tmp_path), "--no-plots"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    (row,) = [r for r in html_table_rows(page, "runs") if r["model"] == "oracle"]
    assert row["date"] == "2026-11-22 06:34:42 UTC"
    generated = page.split("generated ", 1)[1].split(" by ", 1)[0]
    stamp = dt.datetime.strptime(generated, "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=dt.timezone.utc)
    assert before <= stamp <= dt.datetime.now(dt.timezone.utc)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "Generated " + generated in md
    tables = _md_paired_rows(md)
    assert {"errorradar-paired", "mmerror-paired", "virectify-paired"} <= set(tables)
    starred = unstarred = 0
    for table_id, (rows, caption) in tables.items():
        assert "method" in rows[0] or "Method: paired " in caption, table_id  # the method is shown
        for r in rows:
            star = r["diff"].endswith(" *")
            if r["95% CI"].startswith("—"):  # no interval: no p, no star, compare's note named in the caption
                assert r["p"] == "—" and not star, r
                mark = r["95% CI"].split("(")[1].rstrip(")")
                assert f"{mark}: " in caption and "independent unit" in caption, (r, caption)
                continue
            low, high = (float(x) for x in r["95% CI"].strip("[]").split(", "))
            p = 0.0 if r["p"].startswith("<") else float(r["p"])
            assert r["p"] != "0.000", r  # a p of 0 reads <2/resamples
            assert star == (p < 0.05) == (low > 0 or high < 0), (table_id, r)
            starred, unstarred = starred + star, unstarred + (not star)
    assert starred and unstarred  # oracle vs random has both kinds


# ----------------------------------------------------------------------------------------------- layout


PACKAGE = REPO / "lmms_eval_plugins"


def _module_name(path: Path) -> str:
    parts = ["lmms_eval_plugins", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (at the top or inside a function)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py") if "testing" not in p.relative_to(PACKAGE).parts}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module for a in node.names
                ]
            graph[name].update(t for t in targets if t in files and t != name)
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), list(graph[start])
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return False


def test_the_run_reader_and_the_report_are_in_no_import_circle():
    graph = _import_graph()
    mine = [
        "lmms_eval_plugins.runs",
        "lmms_eval_plugins.compare",
        "lmms_eval_plugins.logged_samples",
        *(m for m in graph if m.startswith("lmms_eval_plugins.report")),
    ]
    assert len(mine) >= 10
    assert [m for m in mine if _reaches(graph, m, m)] == []
    assert "lmms_eval_plugins.runs" in graph["lmms_eval_plugins.compare"]  # compare reads runs, not the report


def test_report_modules_are_small_and_results_suffix_is_defined_once():
    for path in [*(PACKAGE / "report").glob("*.py"), PACKAGE / "runs.py"]:
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 800, path.name
    defined = [
        p.relative_to(REPO).as_posix()
        for p in PACKAGE.rglob("*.py")
        if "RESULTS_SUFFIX = " in p.read_text(encoding="utf-8")
    ]
    assert defined == ["lmms_eval_plugins/logged_samples.py"]  # with the samples files, whose names derive from it


def test_every_package_folder_is_in_the_wheel():
    """pyproject lists packages by name: a new one (like lmms_eval_plugins.report) must be added there."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    folders = {
        _module_name(p / "__init__.py")
        for p in PACKAGE.rglob("*")
        if (p / "__init__.py").is_file() and "__pycache__" not in p.parts
    }
    assert folders - listed == set()
