"""ErrorRadar (K-12 math error detection): first wrong step and error category.

Prompts are the paper's Figures 19 (step) and 20 (category), appendix G.3. Scoring follows
BENCHMARKS.md: ``step_acc``; per-class P/R/F1 over VIS/CAL/REAS/KNOW/MIS with macro averages, an
unparseable category counting against the recall of its gold class and toward no precision.
Three rounds (the paper's protocol): every number per round, then its mean over rounds (per key for a
breakdown) and its sample standard deviation in ``<name>_std``; counts are totals. The typed record each
doc carries is records.py (read through ``record_of``).
"""

from __future__ import annotations

import ast
import hashlib
import re
import urllib.parse
from pathlib import Path
from typing import Any, Mapping

from lmms_eval_plugins.data import (
    DataSource,
    fetch_all,
    cache_dir,
    find_with_extensions,
    hub_file,
    keep_records_with_media,
    stamp_skipped,
    read_csv_records,
    require_fields,
    require_unique,
    resolve_source,
    safe_path,
    source_spec,
    to_dataset,
)
from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.media import load_image
from lmms_eval_plugins.messages import FrameGroup, interleaved_messages
from lmms_eval_plugins.benchmarks.errorradar import spec
from lmms_eval_plugins.benchmarks.errorradar.records import (  # noqa: F401 (ROUNDS_FIELD: read by callers of this module)
    ROUNDS_FIELD,
    Record,
    record_of,
)
from lmms_eval_plugins.benchmarks.errorradar.scoring import CATEGORIES
from lmms_eval_plugins.parsing import match_category, parse_step, strip_reasoning
from lmms_eval_plugins.task_hooks import item_values
from lmms_eval_plugins.doc_fields import CHANCE_FIELD, ORACLE_FIELD, with_rounds

BENCHMARK = "errorradar"
HUB_REPO = "ErrorRadar/ErrorRadar"
CSV_NAME = "ErrorRadar_dataset.csv"
IMAGE_EXTENSIONS = ("png", "jpg", "jpeg", "webp")
LOCAL_LAYOUT = f"errorradar/{CSV_NAME} plus errorradar/images/<question_id>.<png|jpg|jpeg|webp>"

CATEGORY_NAMES = {
    "VIS": "Visual Perception Error",
    "CAL": "Calculation Error",
    "REAS": "Reasoning Error",
    "KNOW": "Knowledge Error",
    "MIS": "Misinterpretation of the Question",
}
# The dataset spells the categories in several ways; match by keyword, case-insensitively (a keyword
# matches at a word start, so its last word is a stem). Beside each name: the common synonyms that
# the paper's own definition of the category names (section 3.1, Figure 20), listed with the reason in
# task_yamls/errorradar/README.md ("Category synonyms"). A longer keyword inside which another
# category's keyword lies wins ("visual misinterpretation" is VIS, "conceptual misunderstanding" KNOW);
# such a phrase comes before its first word's keyword (the first keyword matching at a place is taken).
CATEGORY_KEYWORDS: dict[str, tuple[str, ...]] = {
    "VIS": ("visual misinterpret", "visual", "perception", "perceptual"),
    "CAL": ("calculation", "miscalculat", "computation", "arithmetic", "unit conversion"),
    "REAS": ("reasoning", "logic", "illogical", "inference"),
    "KNOW": ("knowledge", "conceptual misunderstand", "concept", "misconception"),
    "MIS": (
        "misinterpret",
        "misunderstand",
        "misunderstood",
        "comprehension",
        "misread the question",
        "misreading the question",
        "misreading of the question",
    ),
}
REQUIRED_COLUMNS = (
    "question_id",
    "content",
    "answer",
    "user_answer",
    "user_answer_steps",
    "error_step",
    "error_category",
)
_GOLD_STEP = re.compile(r"^\s*step\s*(\d+)\s*$", re.IGNORECASE)
_STEP_LINE = re.compile(r"^\s*step\s*(\d+)\s*[:.：]", re.IGNORECASE | re.MULTILINE)

IMAGE_SLOT = "{image}"
_REFERENCE_BLOCK = """Below is the reference content you need to identify the error step:

Question Image: {image}

Question Text: {content}

Correct Answer: {answer}

Incorrect Answer: {user_answer}

Incorrect Answer Reasoning Steps: {user_answer_steps}

"""
STEP_PROMPT = (
    "Task Definition: You are an education expert proficient in K-12 mathematics. Your task is to identify the first "
    "step where the mistake occurred in the incorrect answer reasoning steps based on the following mathematical "
    "question (including the textual and visual parts), reference answer, and incorrect answer.\n\n"
    "Output format:\n\nError Step: Step X\n\n"
    + _REFERENCE_BLOCK
    + 'Instruction: Please provide the corresponding error step identification in the format "Error Step: Step X", '
    "without any additional content."
)
CATE_PROMPT = (
    "Task Definition: You are an education expert proficient in K-12 mathematics. Your task is to identify the category "
    "of error for the incorrect answer based on the following question (including the textual and visual parts), "
    "reference answer, and incorrect answer. The error should belong to one of the following categories: Visual "
    "Perception Error, Reasoning Error, Knowledge Error, Calculation Error, or Misinterpretation of the Question.\n\n"
    "Output format:\n\nError Category: Clearly indicate which error category it belongs to.\n\n"
    "The definitions of the error categories are as follows:\n\n"
    "★Visual Perception Error: Failure to accurately obtain information from the images or charts in the question due "
    "to visual issues, leading to errors.\n\n"
    "★Reasoning Error: Improper reasoning during the problem-solving process, failure to correctly apply logical "
    "relationships or draw conclusions, leading to errors\n\n"
    "★Knowledge Error: Errors occur when applying relevant knowledge points due to incomplete or incorrect "
    "understanding of knowledge.\n\n"
    "★Calculation Error: Errors occur in the calculation process, such as addition, subtraction, multiplication, "
    "division mistakes, or unit conversion errors, or errors in numerical symbols between multiple steps.\n\n"
    "★Misinterpretation of the Question: Failure to correctly understand the requirements of the question or "
    "misinterpreting the meaning of the question stem, leading to an irrelevant answer, such as answering with numbers "
    "when letters are required, and vice versa.\n\n"
    + _REFERENCE_BLOCK
    + 'Instruction: Please provide the corresponding error category in the format "Error Category: X", without any '
    "additional content."
)


# ----------------------------------------------------------------------------------------------- records


def category_code(text: str) -> str | None:
    parsed = match_category(text, CATEGORY_KEYWORDS)
    return parsed.value if parsed.ok else None


def answer_text(raw: str) -> str:
    """``"['10+5=15']"`` (a Python-literal list) -> ``10+5=15``; anything else is kept as written."""
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return raw
    if isinstance(value, (list, tuple)):
        return "; ".join(str(v) for v in value)
    return raw


def normalize_record(row: Mapping[str, str], *, line: int, path: Path) -> dict[str, Any]:
    """Validate one CSV row and turn it into the fields the prompts and scorers use."""
    record_id = (row.get("question_id") or "").strip() or f"CSV line {line}"
    require_fields(row, REQUIRED_COLUMNS, record_id=record_id, path=path)
    gold_step = _GOLD_STEP.match(row["error_step"] or "")
    if gold_step is None:
        raise DataError(
            f"error_step {row['error_step']!r} is not of the form 'Step N'",
            record=record_id,
            path=str(path),
            fix="write the first wrong step as 'Step N' (1-based)",
        )
    gold_category = category_code(row["error_category"] or "")
    if gold_category is None:
        raise DataError(
            f"error_category {row['error_category']!r} matches none (or several) of {', '.join(CATEGORY_NAMES.values())}",
            record=record_id,
            path=str(path),
            fix="use one of the five category names",
        )
    steps_text = (row["user_answer_steps"] or "").strip()
    step_numbers = [int(n) for n in _STEP_LINE.findall(steps_text)]
    gold = int(gold_step.group(1))
    return {
        "question_id": record_id,
        "study_level": (row.get("study_level") or "").strip(),
        "question_type": (row.get("question_type") or "").strip(),
        "content": row["content"],
        "answer": answer_text(row["answer"]),
        "user_answer": row["user_answer"],
        "user_answer_steps": steps_text,
        # the number of steps bounds a valid prediction; a gold step beyond the listed steps still counts
        "n_steps": max(step_numbers + [gold]),
        "gold_step": gold,
        "gold_category": gold_category,
        "content_image": (row.get("content_image") or "").strip(),
    }


def _attach_local_images(records: list[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    def check(record: dict[str, Any]) -> None:
        found = find_with_extensions(
            folder,
            record["question_id"],
            IMAGE_EXTENSIONS,
            record=record["question_id"],
            field="question_id",
            under="images",
        )
        if found is None:
            raise MediaError(
                "question image not found",
                record=record["question_id"],
                path=str(folder / "images" / f"{record['question_id']}.<{'|'.join(IMAGE_EXTENSIONS)}>"),
                fix=f"put the image there (layout: {LOCAL_LAYOUT}), or set LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA=1 to skip such records",
            )
        record["image_path"] = str(found)

    return keep_records_with_media(BENCHMARK, records, check)


def hub_image_suffix(url: str) -> str:
    """What follows the question id in a downloaded image's cache name: the URL's hash, then its extension.

    Keyed by the URL too: a CSV that points a question at a new address gets the new image, not the old one."""
    ext = url.rsplit(".", 1)[-1].lower() if "." in url.rsplit("/", 1)[-1] else "png"
    ext = ext if ext in IMAGE_EXTENSIONS else "png"
    return f".{hashlib.sha256(url.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}.{ext}"


def _attach_hub_images(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hub CSV holds image URLs: download each once into our cache (concurrently)."""
    folder = cache_dir(BENCHMARK, "images")
    jobs = []
    for record in records:
        url = record["content_image"]
        if url and urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
            # file:// (or any other scheme) would read a local file outside the data and show it to the model
            raise DataError(
                f"content_image {url!r} is not an http(s) URL",
                record=record["question_id"],
                fix="the hub CSV's content_image must be an http:// or https:// address",
            )
        dest = safe_path(
            folder,
            record["question_id"],
            record=record["question_id"],
            field="question_id",
            name=True,
            suffix=hub_image_suffix(url),
        )
        jobs.append((url, dest, record["question_id"]))
    outcomes = dict(zip((r["question_id"] for r in records), fetch_all(jobs)))

    def check(record: dict[str, Any]) -> None:
        outcome = outcomes[record["question_id"]]
        if isinstance(outcome, MediaError):
            raise outcome
        record["image_path"] = str(outcome)

    return keep_records_with_media(BENCHMARK, records, check)


def load_records(source: DataSource) -> list[dict[str, Any]]:
    if source.kind == "hub":
        assert source.hub_repo is not None
        csv_path = hub_file(source.hub_repo, CSV_NAME)
    else:
        assert source.root is not None
        csv_path = source.root / CSV_NAME
        if not csv_path.is_file():
            raise DataError("ErrorRadar CSV not found", path=str(csv_path), fix=f"use this layout: {LOCAL_LAYOUT}")
    records = [normalize_record(row, line=i + 2, path=csv_path) for i, row in enumerate(read_csv_records(csv_path))]
    if not records:
        raise DataError("the ErrorRadar CSV has no rows", path=str(csv_path), fix="check the file")
    require_unique(records, "question_id", path=csv_path, where=lambda i: f"line {i + 2}")
    return _attach_hub_images(records) if source.kind == "hub" else _attach_local_images(records, source.root)


def _load_docs(dataset: Any, sample_dir: Path | None) -> tuple[list[dict[str, Any]], int]:
    """``sample_dir``: the bundled sample data beside the YAMLs lmms-eval loaded (task_hooks binds it)."""
    source_of = source_spec(dataset)
    source = resolve_source(
        BENCHMARK, source_of.get("source", "auto"), sample_dir=sample_dir, hub_repo=HUB_REPO, local_layout=LOCAL_LAYOUT
    )
    return load_records(source), int(source_of.get("rounds", 1))


def step_response(step: int) -> str:
    return f"Error Step: Step {step}"


def category_response(code: str) -> str:
    return f"Error Category: {CATEGORY_NAMES[code]}"


def process_docs_step(dataset: Any, sample_dir: Path | None = None):
    records, rounds = _load_docs(dataset, sample_dir)
    docs = [
        {
            **Record.of(r, n_rounds=rounds).columns(),
            ORACLE_FIELD: step_response(r["gold_step"]),
            CHANCE_FIELD: [step_response(k) for k in range(1, r["n_steps"] + 1)],
        }
        for r in records
    ]
    return to_dataset(with_rounds(stamp_skipped(docs, records), rounds))


def process_docs_cate(dataset: Any, sample_dir: Path | None = None):
    records, rounds = _load_docs(dataset, sample_dir)
    chance = [category_response(code) for code in CATEGORIES]
    docs = [
        {
            **Record.of(r, n_rounds=rounds).columns(),
            ORACLE_FIELD: category_response(r["gold_category"]),
            CHANCE_FIELD: chance,
        }
        for r in records
    ]
    return to_dataset(with_rounds(stamp_skipped(docs, records), rounds))


# ----------------------------------------------------------------------------------------------- prompts


def _prompt_parts(template: str, record: Record) -> tuple[str, str]:
    """The prompt split at the image slot: (text before the image, text after it)."""
    filled = template.replace(IMAGE_SLOT, "\0").format(
        content=record.content,
        answer=record.answer,
        user_answer=record.user_answer,
        user_answer_steps=record.user_answer_steps,
    )
    before, after = filled.split("\0")
    return before.rstrip(" "), after


def _template(task: str) -> str:
    return STEP_PROMPT if task == "step" else CATE_PROMPT


def _image(record: Record) -> list:
    return [load_image(record.image_path, record_id=record.question_id)]


def doc_to_visual(doc: Mapping[str, Any]) -> list:
    return _image(record_of(doc))


def _doc_to_text(doc: Mapping[str, Any], task: str) -> str:
    # "<image>" marks the slot; lmms-eval's simple model classes strip or expand it.
    before, after = _prompt_parts(_template(task), record_of(doc))
    return f"{before} <image>{after}"


def _doc_to_messages(doc: Mapping[str, Any], task: str) -> list[dict[str, Any]]:
    # One user turn: the prompt with the image at its slot.
    record = record_of(doc)
    before, after = _prompt_parts(_template(task), record)
    return interleaved_messages(before, [FrameGroup("", _image(record), kind="image")], after)


def doc_to_text_step(doc, lmms_eval_specific_kwargs=None):
    return _doc_to_text(doc, "step")


def doc_to_text_cate(doc, lmms_eval_specific_kwargs=None):
    return _doc_to_text(doc, "cate")


def doc_to_messages_step(doc, lmms_eval_specific_kwargs=None):
    return _doc_to_messages(doc, "step")


def doc_to_messages_cate(doc, lmms_eval_specific_kwargs=None):
    return _doc_to_messages(doc, "cate")


# ----------------------------------------------------------------------------------------------- scoring


def _result_item(record: Record, gold: Any, pred: Any, error: str | None) -> dict[str, Any]:
    # ``score``: the 0/1 lmms-eval's own clustered standard error and ``--baseline`` paired test read
    correct = pred is not None and pred == gold
    return {
        "question_id": record.question_id,
        "question_type": record.question_type,
        "round": record.round,
        "gold": gold,
        "pred": pred,
        "correct": correct,
        "parse_error": error,
        "score": float(correct),
    }


def score_step(doc: Mapping[str, Any], response: str) -> dict[str, Any]:
    record = record_of(doc)
    parsed = parse_step(strip_reasoning(response or ""), label="Error Step", max_step=record.n_steps)
    return _result_item(record, record.gold_step, parsed.value, parsed.error)


def score_category(doc: Mapping[str, Any], response: str) -> dict[str, Any]:
    record = record_of(doc)
    parsed = match_category(strip_reasoning(response or ""), CATEGORY_KEYWORDS, label="Error Category")
    return _result_item(record, record.gold_category, parsed.value, parsed.error)


def _repeated(doc: Mapping[str, Any]) -> bool:
    return record_of(doc).n_rounds > 1


# Each doc fills exactly its task's metric list in spec.py (a 1-round task reports no `*_std`: lmms-eval
# would print a metric that is not in the task's list as an empty list).
def process_results_step(doc, results):
    response = results[0] if results else ""
    metrics = spec.ERRORRADAR_STEP_3ROUNDS if _repeated(doc) else spec.STEP_TEMPLATE
    return item_values(metrics, score_step(doc, response), [response], doc=doc)


def process_results_cate(doc, results):
    response = results[0] if results else ""
    metrics = spec.ERRORRADAR_CATE_3ROUNDS if _repeated(doc) else spec.CATE_TEMPLATE
    return item_values(metrics, score_category(doc, response), [response], doc=doc)


# What the task YAMLs name (lmms_eval_plugins/task_hooks.py adds the aggregations from the spec).
HOOKS = (
    "process_docs_step",
    "process_docs_cate",
    "doc_to_visual",
    "doc_to_text_step",
    "doc_to_text_cate",
    "doc_to_messages_step",
    "doc_to_messages_cate",
    "process_results_step",
    "process_results_cate",
)
