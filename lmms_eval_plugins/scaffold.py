"""``lmms-eval-plugins new-benchmark NAME``: write a pip-installable package for a new benchmark.

The package registers its :class:`~lmms_eval_plugins.benchmark.Benchmark` in the entry-point group
``lmms_eval_plugins.benchmarks``, so after ``pip install`` and nothing else a plain ``lmms-eval --tasks
NAME_sample`` finds its tasks (``discovery.plugin_task_dirs``), ``--model oracle`` scores 100,
``lmms-eval-plugins report`` draws its section and ``export-upstream NAME`` exports it. Layout::

    DEST/lmms-eval-plugins-NAME/
      pyproject.toml                 setuptools; entry point NAME = "NAME_bench.spec:BENCHMARK"
      README.md                      what to edit next
      NAME_bench/
        spec.py                      the Benchmark: each metric with its aggregation, data, hooks
        scoring.py                   the aggregations (items -> number), pure
        tasks.py                     typed records + validation, prompt, parser, per-item scoring, HOOKS
        task_yamls/NAME/             the task folder (named NAME: export-upstream names its output after it)
          _NAME_template_yaml        shared config; metric_list generated from the spec's table
          NAME_sample.yaml           the bundled sample (sources/sample.json)
          NAME.yaml                  the real data ($LMMS_EVAL_PLUGINS_DATA_ROOT/NAME/records.jsonl)
          utils.py                   generated: binds each hook the YAMLs name (sync-yaml rewrites it)
          sources/, sample_data/records.jsonl, README.md
      tests/test_NAME.py             unit tests of parsing and scoring

The task folder is not called ``tasks/`` because ``tasks.py`` sits beside it (one import name, two
things). The templates are strings here, so the package needs no data files of its own.

Usage::

    lmms-eval-plugins new-benchmark my_bench --dest ~/src --title "MyBench"
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lmms_eval_plugins.benchmark import Metric, registry, with_run_counts
from lmms_eval_plugins.safe_files import write_atomic
from lmms_eval_plugins.task_hooks import utils_text
from lmms_eval_plugins.yaml_index import read_task_yamls
from lmms_eval_plugins.yaml_sync import render

NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")
MAX_NAME_LENGTH = 40
PACKAGE_SUFFIX = "_bench"
DIST_PREFIX = "lmms-eval-plugins-"
_TOKEN = re.compile(r"@([A-Z][A-Z_]*)@")

# The generated benchmark's metric table: spec.py and the YAML's metric_list are both written from it;
# AGGREGATES names each scored metric's aggregation in the generated scoring.py.
METRICS: tuple[Metric, ...] = (
    Metric(
        "accuracy",
        True,
        paper_name="Acc",
        item_score="correct",
        description="percent of records whose parsed option letter is the gold one",
    ),
    Metric("parse_fail", False, unit="count", description="replies with no readable option letter (scored wrong)"),
)
AGGREGATES = {"accuracy": "accuracy_of", "parse_fail": "parse_failures"}
# The generated tasks.py's HOOKS, each with whether it reads the bundled sample data (its utils.py binds it).
HOOKS = (
    ("process_docs", True),
    ("doc_to_visual", False),
    ("doc_to_text", False),
    ("doc_to_messages", False),
    ("process_results", False),
)


class ScaffoldError(Exception):
    """The benchmark cannot be written as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Names:
    name: str  # the benchmark and task-name prefix: my_bench
    title: str  # as the paper writes it: MyBench

    @property
    def package(self) -> str:  # the import package: my_bench_bench
        return self.name + PACKAGE_SUFFIX

    @property
    def dist(self) -> str:  # the distribution: lmms-eval-plugins-my-bench
        return DIST_PREFIX + self.name.replace("_", "-")

    @property
    def template_yaml(self) -> str:
        return f"_{self.name}_template_yaml"


def default_title(name: str) -> str:
    return " ".join(part.capitalize() for part in name.split("_") if part)


# ------------------------------------------------------------------------------------------------ names


def builtin_task_folder() -> Path | None:
    """lmms-eval's own ``tasks/`` folder, found without importing lmms-eval's task code."""
    try:
        spec = importlib.util.find_spec("lmms_eval.tasks")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def task_names_in(folder: Path, *, with_folders: bool = False) -> set[str]:
    """Task and group names declared below ``folder`` and its YAML stems; ``with_folders`` adds the names of
    its top-level sub-folders (lmms-eval's own folder is one sub-folder per benchmark, named after it)."""
    names = (
        {p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
        if with_folders
        else set()
    )
    entries = read_task_yamls([folder], skip_unreadable=True)  # lmms-eval's folder is not ours to judge
    names.update(e.path.stem for e in entries if e.path.suffix == ".yaml")
    names.update(e.name for e in entries if e.kind)
    names.update(e.config["group"] for e in entries if isinstance(e.config.get("group"), str))  # a task's legacy group
    return names


def clashes(name: str, taken: Iterable[str]) -> list[str]:
    """The names in ``taken`` that a benchmark called ``name`` would own (``name`` or ``name_*``)."""
    return sorted(t for t in set(taken) if t == name or t.startswith(name + "_"))


def check_name(name: str) -> None:
    """Refuse a name that is malformed, installed, or would take over existing tasks."""
    if not NAME_PATTERN.fullmatch(name) or name.endswith("_") or "__" in name:
        raise ScaffoldError(
            f"{name!r} is not a benchmark name: use lowercase letters, digits and single '_', "
            "starting with a letter and not ending with '_' (e.g. my_bench)"
        )
    if len(name) > MAX_NAME_LENGTH:
        raise ScaffoldError(f"{name!r} is longer than {MAX_NAME_LENGTH} characters")
    installed = registry()
    if name in installed:
        raise ScaffoldError(
            f"{name!r} is already an installed benchmark (its tasks are in {installed[name].tasks_dir}); "
            "choose another name"
        )
    for spec in installed.values():
        taken = clashes(name, task_names_in(spec.tasks_dir)) if spec.tasks_dir.is_dir() else []
        if taken:
            raise ScaffoldError(
                f"{name!r} would take over tasks of the installed benchmark {spec.name!r} "
                f"({', '.join(taken[:5])}): task names are owned by prefix; choose another name"
            )
    folder = builtin_task_folder()
    taken = clashes(name, task_names_in(folder, with_folders=True)) if folder is not None and folder.is_dir() else []
    if taken:
        raise ScaffoldError(
            f"{name!r} clashes with lmms-eval's built-in tasks ({', '.join(taken[:5])}"
            f"{', ...' if len(taken) > 5 else ''}): lmms-eval keeps its own task of a name, and the "
            "report would count those tasks as this benchmark's; choose another name"
        )
    package = name + PACKAGE_SUFFIX
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        found = None
    if found is not None:
        raise ScaffoldError(
            f"a module named {package!r} is already importable ({found.origin or 'namespace'}); choose another name"
        )


# ------------------------------------------------------------------------------------------------ rendering


def metric_source(metric: Metric) -> str:
    """``Metric("accuracy", True, item_score="correct")``: the fields that differ from the defaults
    (strings as JSON, which is valid Python; the description on a line of its own)."""
    defaults = {f.name: f.default for f in dataclasses.fields(Metric)}
    extras = [
        f"{f}={json.dumps(getattr(metric, f))}"
        for f in ("paper_name", "unit", "aggregation", "item_score")
        if getattr(metric, f) != defaults[f]
    ]
    if metric.name in AGGREGATES:
        extras.append(f"aggregate={AGGREGATES[metric.name]}")
    head = ", ".join([json.dumps(metric.name), repr(metric.higher_is_better), *extras])
    if metric.description:
        return f"Metric({head},\n           description={json.dumps(metric.description)})"
    return f"Metric({head})"


def metric_list_yaml(metrics: Sequence[Metric]) -> str:
    """The YAML block ``lmms-eval-plugins sync-yaml`` writes, so the generated files pass ``--check``."""
    return render(metrics)


def fill(template: str, values: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        try:
            return values[match.group(1)]
        except KeyError:  # a template names a value nobody gives: a bug here, not a user error
            raise KeyError(f"template token @{match.group(1)}@ has no value") from None

    return _TOKEN.sub(one, template)


def render_files(names: Names) -> dict[str, str]:
    """Relative path -> content of every file of the package."""
    values = {
        "NAME": names.name,
        "TITLE": names.title,
        "TITLE_PY": json.dumps(names.title),  # a valid Python string literal, any title
        "PKG": names.package,
        "DIST": names.dist,
        "TEMPLATE_YAML": names.template_yaml,
        "METRICS_PY": "".join(f"    {metric_source(m)},\n" for m in METRICS),
        "METRIC_LIST": metric_list_yaml(with_run_counts(METRICS)),
        "AGGREGATES": ", ".join(sorted(AGGREGATES.values())),
        "UTILS": utils_text(
            names.name, names.package, HOOKS, list(dict.fromkeys(m.hook for m in with_run_counts(METRICS)))
        ),
        "HOOKS": repr(tuple(name for name, _ in HOOKS)).replace("'", '"'),
    }
    task_dir = f"{names.package}/task_yamls/{names.name}"
    layout = {
        "pyproject.toml": PYPROJECT,
        "README.md": README,
        ".gitignore": GITIGNORE,
        f"{names.package}/__init__.py": PACKAGE_INIT,
        f"{names.package}/spec.py": SPEC,
        f"{names.package}/scoring.py": SCORING,
        f"{names.package}/tasks.py": TASKS,
        f"{task_dir}/{names.template_yaml}": TEMPLATE_YAML,
        f"{task_dir}/{names.name}_sample.yaml": SAMPLE_YAML,
        f"{task_dir}/{names.name}.yaml": FULL_YAML,
        f"{task_dir}/utils.py": UTILS,
        f"{task_dir}/README.md": TASK_README,
        f"{task_dir}/sources/sample.json": json.dumps({"benchmark": names.name, "source": "sample"}) + "\n",
        f"{task_dir}/sources/auto.json": json.dumps({"benchmark": names.name, "source": "auto"}) + "\n",
        f"{task_dir}/sample_data/records.jsonl": "".join(json.dumps(r) + "\n" for r in SAMPLE_RECORDS),
        f"tests/test_{names.name}.py": TESTS,
    }
    return {path: fill(text, values) for path, text in layout.items()}


def write_package(names: Names, dest: Path, *, force: bool = False) -> Path:
    """Write ``dest/lmms-eval-plugins-NAME/`` and return it. ``force`` overwrites our files in an existing one."""
    root = Path(dest).expanduser().resolve() / names.dist
    if root.exists() and not force:
        raise ScaffoldError(f"{root} exists; pass --force to overwrite the generated files in it")
    if root.exists() and not root.is_dir():
        raise ScaffoldError(f"{root} exists and is not a folder")
    files = render_files(names)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    return root


# ------------------------------------------------------------------------------------------------ CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins new-benchmark",
        description="Write a pip-installable package for a new benchmark (spec, task YAMLs with a NAME_sample task "
        "on bundled records, task code, tests, README), registered in the lmms_eval_plugins.benchmarks entry-point group.",
    )
    parser.add_argument(
        "name", metavar="NAME", help="benchmark name and task prefix: lowercase identifier, e.g. my_bench"
    )
    parser.add_argument(
        "--dest",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="folder to write lmms-eval-plugins-NAME/ into (default: the current folder)",
    )
    parser.add_argument("--title", help="the benchmark's name as its paper writes it (default: from NAME)")
    parser.add_argument(
        "--force", action="store_true", help="overwrite the generated files of an existing package folder"
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    title = (args.title if args.title is not None else default_title(args.name)).strip()
    try:
        if not title or not title.isprintable() or '"' in title or "\\" in title:
            raise ScaffoldError(
                "--title must be one non-empty line of printable text without '\"' or '\\' "
                "(it goes into Python and TOML strings)"
            )
        check_name(args.name)
        names = Names(args.name, title)
        root = write_package(names, args.dest, force=args.force)
    except ScaffoldError as exc:
        print(f"new-benchmark: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {root}")
    print(
        f"next: pip install -e {root}   then   lmms-eval --model oracle --tasks {names.name}_sample "
        f"--batch_size 1 --output_path out/   (accuracy 100); see {root / 'README.md'}"
    )
    return 0


# ================================================================================================ templates
# Tokens @NAME@, @TITLE@, @PKG@ ... are filled by render_files; every other character is copied as is.

SAMPLE_RECORDS: tuple[dict[str, object], ...] = (
    {
        "id": "q1",
        "question": "What is 7 + 5?",
        "options": ["10", "12", "13", "14"],
        "answer": "B",
        "category": "arithmetic",
    },
    {
        "id": "q2",
        "question": "Which planet is closest to the Sun?",
        "options": ["Venus", "Mars", "Mercury"],
        "answer": "C",
        "category": "science",
    },
    {
        "id": "q3",
        "question": "If every cat is a mammal and Tom is a cat, what is Tom?",
        "options": ["a mammal", "a bird"],
        "answer": "A",
        "category": "logic",
    },
    {
        "id": "q4",
        "question": "Which word means the same as 'rapid'?",
        "options": ["slow", "heavy", "quiet", "fast"],
        "answer": "D",
        "category": "language",
    },
)

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "@DIST@"
version = "0.1.0"
description = "@TITLE@ for lmms-eval, as an lmms-eval-plugins benchmark"
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["lmms-eval-plugins"]

[project.optional-dependencies]
test = ["pytest>=8.0"]

# How lmms-eval-plugins (and through it a plain `lmms-eval --tasks @NAME@_sample`) finds this benchmark.
[project.entry-points."lmms_eval_plugins.benchmarks"]
@NAME@ = "@PKG@.spec:BENCHMARK"

[tool.setuptools]
include-package-data = false
# the task folder has no __init__.py (lmms-eval imports its utils.py by path); listed so its files install
packages = ["@PKG@", "@PKG@.task_yamls", "@PKG@.task_yamls.@NAME@"]

[tool.setuptools.package-data]
"@PKG@.task_yamls.@NAME@" = ["*.yaml", "_*_yaml", "*.py", "*.md", "sources/*.json", "sample_data/*"]

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]
"""

GITIGNORE = """\
__pycache__/
*.egg-info/
build/
dist/
out/
"""

README = """\
# @DIST@

@TITLE@ for [lmms-eval](https://github.com/EvolvingLMMs-Lab/lmms-eval), packaged as an lmms-eval-plugins
benchmark. Generated by `lmms-eval-plugins new-benchmark @NAME@`; the walk-through is lmms-eval-plugins'
`docs/adding-a-benchmark.md`.

## Try it

```bash
pip install -e .                                   # registers the benchmark (entry point in pyproject.toml)
lmms-eval --tasks list | grep @NAME@                 # @NAME@, @NAME@_sample
lmms-eval --model oracle --tasks @NAME@_sample --batch_size 1 --output_path out/oracle --log_samples   # accuracy 100
lmms-eval --model random --tasks @NAME@_sample --batch_size 1 --output_path out/random --log_samples
lmms-eval-plugins report out/oracle out/random -o out/report
pip install -e '.[test]' && pytest                 # tests/test_@NAME@.py (the test extra brings pytest)
```

## What to edit next

1. `@PKG@/task_yamls/@NAME@/sample_data/records.jsonl`: a few records in the real data's schema (text-only
   multiple choice for now: `id`, `question`, `options`, `answer` letter, optional `category`).
2. `@PKG@/tasks.py`: the record schema and its checks (`Record`, `parse_record`: every bad record is a
   `DataError` naming the record, the file and the fix), the prompt (`PROMPT`, `prompt_text`, `doc_to_visual`
   for images or frames), the answer parser (`parse_answer`) and the per-sample item (`score`). Keep
   `oracle_response` (the reply a perfect model gives, in the prompt's format) and `chance_responses` (what a
   chance answerer picks from) on every doc.
3. `@PKG@/spec.py`: title, description, `data`, and the metric table `METRICS`: a metric is added, renamed
   or removed there alone, naming its aggregation (a pure function of the items, in `scoring.py`). Then
   `lmms-eval-plugins sync-yaml @NAME@` rewrites the YAML's `metric_list` and `task_yamls/@NAME@/utils.py`
   (generated: one line per hook, so "go to definition" leads from a YAML's `!function utils.X` to the
   code; never edit it).
4. `@PKG@/task_yamls/@NAME@/README.md`: what the benchmark measures, the data layout, the citation.
5. `tests/test_@NAME@.py`: hand-computed cases for your parser and metrics.
6. The real data: `$LMMS_EVAL_PLUGINS_DATA_ROOT/@NAME@/records.jsonl` runs `--tasks @NAME@`. For a hub
   download, set `HUB_REPO` in `tasks.py` and read it in `process_docs`.
7. Optional: a report section of your own (`report_section = "@PKG@.report:section"` in the spec; the
   default one is a table of the metric table's numbers), and `lmms-eval-plugins export-upstream @NAME@ DIR`.

Check after each step: `pytest` (after `pip install -e '.[test]'`), `lmms-eval-plugins sync-yaml --check @NAME@`, and the oracle run above
(anything below 100 is a bug in the data, the prompt's format, the parser or the scoring).
"""

PACKAGE_INIT = '''\
"""@TITLE@ for lmms-eval: the benchmark spec (spec.py) and its task code (tasks.py)."""
'''

SPEC = '''\
"""@TITLE@ as lmms-eval-plugins sees it (pyproject.toml registers BENCHMARK in the entry-point group
lmms_eval_plugins.benchmarks). A metric is added, renamed or removed here alone: its aggregation is named
here, the YAML's metric_list is generated from here, and process_results fills every metric listed here."""

from __future__ import annotations

from pathlib import Path

from lmms_eval_plugins.benchmark import Benchmark, Metric

from @PKG@.scoring import @AGGREGATES@

# The task folder: YAMLs, utils.py (the hooks lmms-eval calls), sources/ and sample_data/.
TASKS_DIR = Path(__file__).resolve().parent / "task_yamls" / "@NAME@"

# The metric table. The YAML's metric_list is generated from it: `lmms-eval-plugins sync-yaml @NAME@`.
# Each metric names its aggregation (scoring.py). The run-wide counts (`skipped`, `unscored`,
# `skipped_by_reason`) end every metric list: lmms-eval-plugins adds and computes them itself.
METRICS = (
@METRICS_PY@)

BENCHMARK = Benchmark(
    name="@NAME@",
    title=@TITLE_PY@,
    description="Text multiple-choice questions (replace with one line on what @TITLE@ measures)",
    tasks_dir=TASKS_DIR,
    metric_lists={"@TEMPLATE_YAML@": METRICS},
    data="records.jsonl in $LMMS_EVAL_PLUGINS_DATA_ROOT/@NAME@/ (the bundled sample needs nothing)",
    report_section="",  # "@PKG@.report:section" for a section of its own; "" draws the default table
    sample_dir=TASKS_DIR / "sample_data",
    readme=TASKS_DIR / "README.md",
)
'''

TASKS = '''\
"""@TITLE@: records, prompt, answer parsing and scoring, as pure typed functions.

lmms-eval calls these through the task folder's utils.py (``!function utils.X`` in the YAMLs). A record
is one JSON object per line of ``records.jsonl``::

    {"id": "q1", "question": "What is 7 + 5?", "options": ["10", "12"], "answer": "B", "category": "arithmetic"}

Every doc carries ``oracle_response`` (the reply a perfect model gives, in the format the prompt asks
for: ``--model oracle`` must score 100) and ``chance_responses`` (what ``--model random`` picks from).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmms_eval_plugins.data import iter_jsonl, resolve_source, source_spec, stamp_skipped, to_dataset
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.messages import interleaved_messages
from lmms_eval_plugins.parsing import Parsed, parse_option_letter
from lmms_eval_plugins.task_hooks import item_values
from lmms_eval_plugins.doc_fields import CHANCE_FIELD, ORACLE_FIELD

from @PKG@ import spec

BENCHMARK = "@NAME@"
RECORDS_FILE = "records.jsonl"
LOCAL_LAYOUT = f"{BENCHMARK}/{RECORDS_FILE} (one JSON object per line: id, question, options, answer)"
HUB_REPO: str | None = None  # a Hugging Face dataset id once the data is public (then read it in process_docs)
LETTERS = string.ascii_uppercase
MIN_OPTIONS, MAX_OPTIONS = 2, len(LETTERS)
REQUIRED_FIELDS = ("id", "question", "options", "answer")
# What the task YAMLs name (`!function utils.X`); the aggregations come from spec.py.
HOOKS = @HOOKS@

PROMPT = "{question}\\n{options}\\nAnswer with the option's letter from the given choices directly."


# ----------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Record:
    id: str
    question: str
    options: tuple[str, ...]
    answer: str  # the gold option letter
    category: str = ""

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.options)]


def parse_record(raw: Mapping[str, Any], *, line: int, path: Path) -> Record:
    """One validated record; a bad one is a DataError naming the record, the file and the fix."""
    record_id = str(raw.get("id") or f"line {line}")

    def bad(problem: str, fix: str) -> DataError:
        return DataError(problem, record=record_id, path=str(path), fix=fix)

    missing = [name for name in REQUIRED_FIELDS if raw.get(name) is None or raw.get(name) == ""]
    if missing:
        raise bad(f"missing field(s) {', '.join(missing)}", f"add them; see {LOCAL_LAYOUT}")
    question, options, category = raw["question"], raw["options"], raw.get("category", "")
    if not isinstance(question, str) or not question.strip():
        raise bad("question is not a non-empty string", "write the question as text")
    if not isinstance(options, list) or not all(isinstance(o, str) and o.strip() for o in options):
        raise bad(f"options {options!r} is not a list of non-empty strings", 'write options as ["text A", "text B", ...]')
    if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
        raise bad(f"{len(options)} options; a question needs {MIN_OPTIONS} to {MAX_OPTIONS}", "fix the options list")
    letters = LETTERS[: len(options)]
    answer = raw["answer"].strip().upper() if isinstance(raw["answer"], str) else ""
    if len(answer) != 1 or answer not in letters:
        raise bad(f"answer {raw['answer']!r} is not one of the option letters {', '.join(letters)}",
                  "give the gold option's letter (A for the first option)")
    if not isinstance(category, str):
        raise bad(f"category {category!r} is not a string", "write the category as text, or leave it out")
    return Record(record_id, question, tuple(options), answer, category)


def load_records(path: Path) -> list[Record]:
    """Every record of a records.jsonl, validated; ids must be unique."""
    if not path.is_file():
        raise DataError(f"{RECORDS_FILE} not found", path=str(path), fix=f"use this layout: {LOCAL_LAYOUT}")
    records: list[Record] = []
    seen: set[str] = set()
    for line, raw in iter_jsonl(path):
        record = parse_record(raw, line=line, path=path)
        if record.id in seen:
            raise DataError("duplicate id", record=record.id, path=str(path), fix="give every record its own id")
        seen.add(record.id)
        records.append(record)
    if not records:
        raise DataError("no records", path=str(path), fix="one JSON object per line")
    return records


def oracle_response(record: Record) -> str:
    return record.answer


def chance_responses(record: Record) -> list[str]:
    return list(record.letters)


def to_doc(record: Record) -> dict[str, Any]:
    return {"id": record.id, "question": record.question, "options": list(record.options), "answer": record.answer,
            "category": record.category, ORACLE_FIELD: oracle_response(record), CHANCE_FIELD: chance_responses(record)}


def process_docs(dataset: Any, sample_dir: Path | None = None):
    """lmms-eval's dataset is the one-row source file (sources/*.json): it names where the records are.
    ``sample_dir``: the bundled sample_data/ beside the YAMLs lmms-eval loaded (utils.py binds it)."""
    named = source_spec(dataset)
    source = resolve_source(BENCHMARK, str(named.get("source", "auto")), sample_dir=sample_dir, hub_repo=HUB_REPO,
                            local_layout=LOCAL_LAYOUT)
    if source.root is None:
        raise DataError(f"reading {BENCHMARK} from the hub is not written yet", fix="read HUB_REPO in process_docs")
    records = load_records(source.root / RECORDS_FILE)
    return to_dataset(stamp_skipped([to_doc(r) for r in records], records))  # skipped: the run-wide count


# ----------------------------------------------------------------------------------------------- prompt


def prompt_text(doc: Mapping[str, Any]) -> str:
    options = "\\n".join(f"{letter}. {text}" for letter, text in zip(LETTERS, doc["options"]))
    return PROMPT.format(question=doc["question"], options=options)


def doc_to_visual(doc: Mapping[str, Any]) -> list[Any]:
    return []  # text-only; a multimodal benchmark returns its images (lmms_eval_plugins.media) here


def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Any = None) -> str:
    return prompt_text(doc)


def doc_to_messages(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Any = None) -> list[dict[str, Any]]:
    return interleaved_messages(prompt_text(doc), [], "")


# ----------------------------------------------------------------------------------------------- scoring


def parse_answer(response: Any, n_options: int) -> Parsed[str]:
    """The option letter of a reply (reasoning and markup stripped), in the forms real models write ("The
    answer is B.", "Option B", full-width letters: ``prose=True``); a failure says why, never raises."""
    return parse_option_letter(response, LETTERS[:n_options], prose=True)


def score(doc: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """One sample's result item (logged with the sample; the aggregations read it)."""
    parsed = parse_answer(response, len(doc["options"]))
    return {"id": doc["id"], "category": doc.get("category", ""), "gold": doc["answer"], "pred": parsed.value,
            "correct": parsed.value == doc["answer"], "parse_error": parsed.error}


def process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    response = results[0] if results else ""
    # the item under every metric of the spec; a failed model request is unscored, not wrong
    return item_values(spec.METRICS, score(doc, response), [response], doc=doc)
'''

SCORING = '''\
"""@TITLE@'s aggregations: the items process_results built in, one number out (pure; spec.py names them).
An aggregation never sees an unscored item: lmms-eval-plugins makes the metric null instead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmms_eval_plugins.metrics import accuracy


def accuracy_of(items: Sequence[Mapping[str, Any]]) -> float:
    return accuracy([bool(i["correct"]) for i in items])


def parse_failures(items: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for i in items if i["pred"] is None)
'''

UTILS = "@UTILS@"

TEMPLATE_YAML = """\
# Shared by the @NAME@ tasks. Each task YAML includes it and names its data source (sources/*.json).
dataset_path: json
test_split: test
output_type: generate_until
process_docs: !function utils.process_docs
doc_to_visual: !function utils.doc_to_visual
doc_to_text: !function utils.doc_to_text
doc_to_messages: !function utils.doc_to_messages
doc_to_target: oracle_response
generation_kwargs:
  until: []  # lmms-eval would default to "\\n\\n", cutting multi-paragraph and <think> replies
  max_new_tokens: 32
  temperature: 0
  do_sample: false
process_results: !function utils.process_results
@METRIC_LIST@metadata:
  version: 0.1
"""

SAMPLE_YAML = """\
task: @NAME@_sample
include: @TEMPLATE_YAML@
dataset_kwargs:
  data_files:
    test: sources/sample.json
"""

FULL_YAML = """\
task: @NAME@
include: @TEMPLATE_YAML@
dataset_kwargs:
  data_files:
    test: sources/auto.json
"""

TASK_README = """\
# @TITLE@

One line on what @TITLE@ measures, and the paper it comes from.

## Tasks

| task | data |
|---|---|
| `@NAME@_sample` | the bundled `sample_data/records.jsonl` (runs offline) |
| `@NAME@` | `$LMMS_EVAL_PLUGINS_DATA_ROOT/@NAME@/records.jsonl` |

## Records

One JSON object per line: `id` (unique), `question`, `options` (2 to 26 strings, lettered A, B, ...),
`answer` (the gold letter), `category` (optional). The model is asked for the option's letter.

## Metrics

`accuracy` (percent of replies whose option letter is the gold one), `parse_fail` (replies with no
readable letter: scored wrong, and counted), `unscored` (failed model requests: their metrics are null,
never wrong).

## Citation

```bibtex
@misc{@NAME@,
  title = {@TITLE@}
}
```
"""

TESTS = '''\
"""Unit tests of @TITLE@'s records, parser and scoring, with hand-computed cases. Run: pip install -e '.[test]' && pytest"""

from __future__ import annotations

import json
import re

import pytest
from lmms_eval_plugins import yaml_sync
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.outcome import UNSCORED_METRIC
from lmms_eval_plugins.task_hooks import aggregation_of

from @PKG@ import tasks
from @PKG@.spec import BENCHMARK

AGG = {m.name: aggregation_of(m) for m in BENCHMARK.metrics().values()}  # what lmms-eval calls, from the spec

SAMPLE = BENCHMARK.tasks_dir / "sample_data" / tasks.RECORDS_FILE


def doc(answer: str = "B", options: tuple[str, ...] = ("red", "green", "blue")) -> dict:
    return {"id": "t1", "question": "Which colour?", "options": list(options), "answer": answer, "category": "c"}


@pytest.mark.parametrize("response, letter", [
    ("B", "B"),
    ("(c)", "C"),  # a bare letter may be lowercase
    ("Answer: A", "A"),
    ("<think>maybe A</think>\\nB", "B"),  # what the model considered while thinking never counts
    ("\\\\boxed{C}", "C"),
    ("The answer is B.", "B"),  # what real models write (prose=True)
    ("Option C", "C"),
    ("I think it is B", None),  # a hedge is not an answer
    ("D", None),  # not among the three options
    ("", None),
])
def test_parse_answer(response, letter):
    assert tasks.parse_answer(response, 3).value == letter


def test_score_right_wrong_and_unparseable():
    assert tasks.score(doc("B"), "B")["correct"] is True
    wrong = tasks.score(doc("B"), "A")
    assert wrong["correct"] is False and wrong["pred"] == "A" and wrong["parse_error"] is None
    unreadable = tasks.score(doc("B"), "no idea")
    assert unreadable["correct"] is False and unreadable["pred"] is None and unreadable["parse_error"]


def test_aggregations_hand_computed():
    # 4 samples: 2 right, 1 wrong, 1 unparseable -> accuracy 2/4 = 50 %, one parse failure
    items = [tasks.process_results(doc("B"), [r]) for r in ("B", "(b)", "C", "hmm")]
    assert AGG["accuracy"]([i["accuracy"] for i in items]) == 50.0
    assert AGG["parse_fail"]([i["parse_fail"] for i in items]) == 1
    assert AGG[UNSCORED_METRIC]([i[UNSCORED_METRIC] for i in items]) == 0


def test_a_failed_request_is_unscored_not_wrong():
    out = tasks.process_results(doc(), ["[LMMS_EVAL_REQUEST_FAILED after 5 retries] Connection error."])
    assert AGG["accuracy"]([out["accuracy"]]) is None
    assert AGG[UNSCORED_METRIC]([out[UNSCORED_METRIC]]) == 1


def test_the_oracle_scores_every_sample_record_and_chance_lists_every_letter():
    records = tasks.load_records(SAMPLE)
    assert len(records) >= 2
    for record in records:
        d = tasks.to_doc(record)
        assert tasks.score(d, d["oracle_response"])["correct"], record.id
        assert d["chance_responses"] == list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(record.options)])
        assert d["answer"] in d["chance_responses"]


def test_the_prompt_letters_every_option():
    text = tasks.prompt_text(doc())
    assert "Which colour?" in text and "A. red" in text and "C. blue" in text


@pytest.mark.parametrize("change, message", [
    ({"answer": "E"}, "not one of the option letters"),
    ({"options": ["only one"]}, "1 options"),
    ({"options": "A or B"}, "not a list"),
    ({"question": None}, "missing field"),
])
def test_a_bad_record_names_itself_and_the_fix(tmp_path, change, message):
    record = {"id": "bad1", "question": "Q?", "options": ["x", "y"], "answer": "A", **change}
    path = tmp_path / tasks.RECORDS_FILE
    path.write_text(json.dumps(record) + "\\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as caught:
        tasks.load_records(path)
    assert caught.value.record == "bad1" and caught.value.fix


def test_duplicate_ids_are_refused(tmp_path):
    line = json.dumps({"id": "q", "question": "Q?", "options": ["x", "y"], "answer": "A"})
    path = tmp_path / tasks.RECORDS_FILE
    path.write_text(line + "\\n" + line + "\\n", encoding="utf-8")
    with pytest.raises(DataError, match="duplicate id"):
        tasks.load_records(path)


def test_the_yaml_metric_list_is_the_spec_table():
    assert yaml_sync.sync(BENCHMARK, check=True) == []
    filled = tasks.process_results(doc(), ["B"])
    # every metric but the skipped counts, which only a doc stamped as kept from skipped records carries
    assert list(filled) == [m.name for m in BENCHMARK.metrics().values() if m.name not in ("skipped", "skipped_by_reason")]


def test_every_hook_the_yamls_name_is_in_utils():
    utils = BENCHMARK.hooks()
    named = {hook for path in BENCHMARK.tasks_dir.iterdir() if path.suffix == ".yaml" or path.name.endswith("_yaml")
             for hook in re.findall(r"!function utils\\.(\\w+)", path.read_text(encoding="utf-8"))}
    assert named and all(callable(getattr(utils, hook, None)) for hook in named), named
'''


if __name__ == "__main__":
    raise SystemExit(main())
