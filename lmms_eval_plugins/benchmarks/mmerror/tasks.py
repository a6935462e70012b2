"""MMErroR: error-type classification (ETC) and two-stage error presence detection (EPD).

Prompts and label letters follow the official evaluation code
(github.com/code-here-in/MMerroR-Evaluation: ``prompts/*.prompt.txt``, ``mmerror_eval/labels.py``,
``mmerror_eval/prompts.py``, ``mmerror_eval/runner.py``). Replies are read twice: by a robust parser
(``accuracy`` and the breakdowns) and by the official parser (official.py: ``official_accuracy``,
``official_strict_accuracy``). EPD's two stages are issued as independent
requests (two docs per sample) and the stage-1 -> stage-2 decision is replayed in the aggregation
(scoring.py, :func:`replay_epd`); see README.md for why that equals the sequential protocol. The
metrics and their aggregations are declared in spec.py; the typed record each doc carries is records.py
(read through ``record_of``); this module loads, prompts and scores one item.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loguru import logger

from lmms_eval_plugins.benchmarks.mmerror import spec
from lmms_eval_plugins.benchmarks.mmerror.labels import (  # noqa: F401 (ERROR_LABELS: read by callers of this module)
    ABSENT,
    ALL_LABELS,
    DEFINITIONS,
    ERROR_LABELS,
    ERROR_LETTERS,
    LABELS,
    NO_ERROR_LABEL,
    OFFICIAL_NOT_ASKED_FIELD,
    PRESENCE_NAMES,
    PRESENT,
    STAGE_PRESENCE,
    STAGE_TYPE,
)
from lmms_eval_plugins.benchmarks.mmerror.official import (
    official_failure,
    official_gold_letter,
    official_letter,
    official_presence,
)
from lmms_eval_plugins.benchmarks.mmerror.records import Record, record_of
from lmms_eval_plugins.benchmarks.mmerror.scoring import replay_epd  # noqa: F401 (the EPD replay, for callers of this module)
from lmms_eval_plugins.data import (
    DataSource,
    find_with_extensions,
    hub_snapshot,
    hub_store,
    keep_records_with_media,
    read_json,
    require_fields,
    resolve_source,
    safe_path,
    source_spec,
    stamp_skipped,
    to_dataset,
)
from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.media import load_image
from lmms_eval_plugins.messages import FrameGroup, interleaved_messages
from lmms_eval_plugins.parsing import (
    Parsed,
    clean_markup,
    match_category,
    parse_option_letter,
    strip_reasoning,
)
from lmms_eval_plugins.task_hooks import item_values
from lmms_eval_plugins.doc_fields import CHANCE_FIELD, ORACLE_FIELD

BENCHMARK = "mmerror"
HUB_REPO = "s-u-do/mmerror-benchmark"
HUB_PATTERNS = ("data/jsons/*", "data/images/*")
JSON_GLOB = "MMErroR_*.json"
AGGREGATE_JSON = "MMErroR_all.json"  # an aggregate of all records on the hub: not a record
IMAGE_EXTENSIONS = ("png", "jpg", "jpeg", "webp")
LOCAL_LAYOUT = "mmerror/data/jsons/MMErroR_<id>.json plus mmerror/data/images/MMErroR_<id>.<png|jpg|jpeg|webp>"
REQUIRED_FIELDS = ("question_id", "question", "error_reason", "label")

# ------------------------------------------------------------------------------------------- labels

# The letters, label names and definitions are in labels.py (the official mmerror_eval/labels.py).
# The data spells some labels in several ways (the knowledge class: Deployment / Application /
# Deficiency). A gold label is read as the official loader reads it (official_gold_letter); these
# keywords only flag a label that names several classes, so the run log shows how it was read.
LABEL_KEYWORDS: dict[str, tuple[str, ...]] = {
    "A": ("visual", "perception"),
    "B": ("reasoning",),
    "C": ("question", "comprehension"),
    "D": ("knowledge",),
    "E": ("noerror", "no error"),
}

# Whole-output one-word replies the official normalize_presence_decision also accepts.
PRESENCE_WORDS = {"none": ABSENT, "error": PRESENT}

# ------------------------------------------------------------------------------------------- prompts
# Wording verbatim from the official prompts/error_label.prompt.txt (ETC), prompts/epd_presence.prompt.txt
# (EPD stage 1) and prompts/epd_type.prompt.txt (EPD stage 2), with the placeholders the official
# mmerror_eval/prompts.py fills in (letters, task mode, instruction, category list) already filled.

_FORMAT_BLOCK = (
    "STRICT OUTPUT FORMAT:\n"
    "- Respond with EXACTLY one uppercase letter: {letters_csv}.\n"
    "- No spaces, no punctuation, no Markdown, no analysis, no explanation, no restatement, no XML tags, "
    "and no extra text.\n"
    "- Your response must be exactly 1 character matching ^[{letters}]$.\n\n"
)
_BODY_BLOCK = (
    "Question: {{question}}\nReasoning: {{error_reason}}\n\n"
    "Categories:\n{categories}\n\n"
    "Output: one letter only ({letters_slash}).\n\n"
)


def _letter_list(letters: str) -> str:
    """ "A, B, C, or D" / "P or N" (official format_letter_list)."""
    if len(letters) <= 2:
        return " or ".join(letters)
    return ", ".join(letters[:-1]) + ", or " + letters[-1]


def _frame(letters: str, categories: Sequence[tuple[str, str]]) -> tuple[str, str]:
    lines = "\n".join(f"{letter}. {name}\n   {definition}" for letter, (name, definition) in zip(letters, categories))
    return (
        _FORMAT_BLOCK.format(letters_csv=_letter_list(letters), letters=letters),
        _BODY_BLOCK.format(categories=lines, letters_slash="/".join(letters)),
    )


_TYPE_CATEGORIES = [(LABELS[c], DEFINITIONS[c]) for c in ERROR_LETTERS]
_TYPE_FORMAT, _TYPE_BODY = _frame(ERROR_LETTERS, _TYPE_CATEGORIES)
_PRESENCE_FORMAT, _PRESENCE_BODY = _frame(
    PRESENT + ABSENT,
    [
        ("Error Present", "The reasoning contains at least one error and should proceed to error-type diagnosis."),
        ("No Error", "The reasoning is fully correct and should not proceed to error-type diagnosis."),
    ],
)

ETC_PROMPT = (
    "You are evaluating a reasoning chain for the MMErroR benchmark.\n\n"
    "Task mode: ETC\n"
    "The reasoning chain is guaranteed to contain exactly one error. Choose the single best error type from A to D.\n\n"
    + _TYPE_FORMAT
    + _TYPE_BODY
)
EPD_PRESENCE_PROMPT = (
    "You are running stage 1 of MMErroR Error Presence Detection (EPD).\n\n"
    "Decide whether the reasoning chain contains an error.\n\n" + _PRESENCE_FORMAT + _PRESENCE_BODY
)
EPD_TYPE_PROMPT = (
    "You are running stage 2 of MMErroR Error Presence Detection (EPD).\n\n"
    "Task mode: EPD-TYPE\n"
    "Stage 2 of EPD: an error has already been determined to be present. Classify the error type from A to D.\n\n"
    + _TYPE_FORMAT
    + _TYPE_BODY
)
PROMPTS = {"etc": ETC_PROMPT, STAGE_PRESENCE: EPD_PRESENCE_PROMPT, STAGE_TYPE: EPD_TYPE_PROMPT}

# ------------------------------------------------------------------------------------------- records


def label_letter(label: str) -> str | None:
    """A gold label as spelled in the data -> its letter A-E, as the official loader reads it in every
    mode (loading is not scoring): "b" is B, "Visual Reasoning Error" is A (the first class named in
    the official order), "Reasoning about the question" is B; None when it names no class."""
    return official_gold_letter(label)


def label_doubt(label: str) -> str | None:
    """Why a gold label's reading is a choice (it names several classes), else None."""
    parsed = match_category(label, LABEL_KEYWORDS)
    return parsed.error if parsed.error and parsed.error.startswith("ambiguous") else None


def _text(record: Mapping[str, Any], name: str, *, record_id: str, path: Path) -> str:
    value = record.get(name)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise DataError(
        f"field {name!r} is a {type(value).__name__}, not a string",
        record=record_id,
        path=str(path),
        fix="write the field as a JSON string",
    )


def normalize_record(raw: Any, *, path: Path) -> dict[str, Any] | None:
    """Validate one record file; ``None`` for a record without a label (skipped, as the official loader does)."""
    if not isinstance(raw, dict):
        raise DataError(
            f"a record file must hold one JSON object, found a {type(raw).__name__}",
            path=str(path),
            fix=f"one object per file (the aggregate {AGGREGATE_JSON} is ignored)",
        )
    record_id = str(raw.get("question_id") or "").strip() or path.name
    require_fields(raw, REQUIRED_FIELDS, record_id=record_id, path=path)
    fields = {
        name: _text(raw, name, record_id=record_id, path=path)
        for name in ("question_id", "question", "correct_answer", "error_reason", "label", "domain", "subdomain")
    }
    if not fields["question_id"].strip():
        raise DataError(
            "question_id is empty",
            record=path.name,
            path=str(path),
            fix="fill in question_id (the image is looked up by it)",
        )
    if not fields["label"].strip():
        return None
    letter = label_letter(fields["label"])
    if letter is None:
        raise DataError(
            f"label {fields['label']!r} matches none of {', '.join(ALL_LABELS)}",
            record=record_id,
            path=str(path),
            fix="use one of the official label names",
        )
    return {
        "question_id": fields["question_id"].strip(),
        "question": fields["question"],
        "correct_answer": fields["correct_answer"],  # not part of any prompt; kept for the logs
        "error_reason": fields["error_reason"],
        "label": LABELS[letter],
        "label_raw": fields["label"],
        "domain": fields["domain"].strip(),
        "subdomain": fields["subdomain"].strip(),
        "json_path": str(path),
    }


def _attach_images(
    records: list[dict[str, Any]], root: Path, within: Path | None = None, skipped: Mapping[str, int] | None = None
) -> list[dict[str, Any]]:
    """``image_path`` = ``root/data/images/<question_id>.<ext>``, resolved inside ``within`` (default ``root``)."""
    images = root / "data" / "images"

    def check(record: dict[str, Any]) -> None:
        found = find_with_extensions(
            root,
            record["question_id"],
            IMAGE_EXTENSIONS,
            record=record["question_id"],
            field="question_id",
            under="data/images",
            within=within,
        )
        if found is None:
            raise MediaError(
                "image not found",
                record=record["question_id"],
                path=str(images / f"{record['question_id']}.<{'|'.join(IMAGE_EXTENSIONS)}>"),
                fix=f"put the image there (layout: {LOCAL_LAYOUT}), or set "
                "LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA=1 to skip such records",
            )
        record["image_path"] = str(found)

    return keep_records_with_media(BENCHMARK, records, check, skipped=skipped)


def benchmark_root(source: DataSource) -> Path:
    """The folder holding ``data/jsons`` and ``data/images`` (the hub snapshot has the same layout)."""
    if source.kind == "hub":
        assert source.hub_repo is not None
        return hub_snapshot(source.hub_repo, allow_patterns=list(HUB_PATTERNS))
    assert source.root is not None
    return source.root


def load_records(source: DataSource) -> list[dict[str, Any]]:
    root = benchmark_root(source)
    within = hub_store(root) if source.kind == "hub" else None  # a snapshot's files link into the hub cache's blobs
    jsons = root / "data" / "jsons"
    files = sorted(p for p in jsons.glob(JSON_GLOB) if p.name != AGGREGATE_JSON) if jsons.is_dir() else []
    for p in files:  # a record file linking out of the data is refused (its name stays the one shown in messages)
        safe_path(root, p.name, record=None, field="record file", under="data/jsons", within=within)
    if not files:
        raise DataError(f"no {JSON_GLOB} record files found", path=str(jsons), fix=f"use this layout: {LOCAL_LAYOUT}")
    records, unlabeled, seen = [], [], {}
    for path in files:
        record = normalize_record(read_json(path), path=path)
        if record is None:
            unlabeled.append(path.name)
            continue
        if record["question_id"] in seen:
            raise DataError(
                f"question_id {record['question_id']!r} is used twice (also in {seen[record['question_id']]})",
                record=record["question_id"],
                path=str(path),
                fix="give every record its own question_id",
            )
        seen[record["question_id"]] = path.name
        records.append(record)
    if unlabeled:
        logger.warning(
            f"[mmerror] skipped {len(unlabeled)} record(s) without a label, as the official loader does: "
            f"{', '.join(unlabeled[:5])}{' ...' if len(unlabeled) > 5 else ''}"
        )
    doubts = [
        f"{Path(r['json_path']).name} {r['label_raw']!r} -> {r['label']}"
        for r in records
        if label_doubt(r["label_raw"])
    ]
    if doubts:
        logger.warning(
            f"[mmerror] {len(doubts)} label(s) name several classes; read as the official loader reads "
            f"them (the first of visual/perception, reasoning, question/comprehension, knowledge): "
            f"{'; '.join(doubts[:5])}{' ...' if len(doubts) > 5 else ''}"
        )
    if not records:
        raise DataError("no MMErroR record has a label", path=str(jsons), fix="check the data")
    return _attach_images(records, root, within, skipped={NO_LABEL_SKIP: len(unlabeled)})


NO_LABEL_SKIP = "no label"


def _load(dataset: Any, sample_dir: Path | None) -> list[dict[str, Any]]:
    source = resolve_source(
        BENCHMARK,
        source_spec(dataset).get("source", "auto"),
        sample_dir=sample_dir,
        hub_repo=HUB_REPO,
        local_layout=LOCAL_LAYOUT,
    )
    return load_records(source)


def _letter_of(label: str) -> str:
    return next(letter for letter, name in LABELS.items() if name == label)


def etc_docs(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One doc per erroneous sample. E_NoError samples are not ETC samples (the prompt says an error exists);
    each doc carries their count (``official_not_asked``) for the official strict denominator."""
    dropped = sum(1 for r in records if r["label"] == NO_ERROR_LABEL)
    docs = [
        {
            **Record.of(r, official_not_asked=dropped).columns(),
            ORACLE_FIELD: _letter_of(r["label"]),
            CHANCE_FIELD: list(ERROR_LETTERS),
        }
        for r in records
        if r["label"] != NO_ERROR_LABEL
    ]
    if dropped:
        logger.info(f"[mmerror_etc] {dropped} E_NoError sample(s) left out: ETC asks only about erroneous chains")
    if not docs:
        raise DataError(
            "no MMErroR sample with an error label, so ETC has nothing to ask", fix="ETC needs samples labelled A-D"
        )
    return docs


def epd_docs(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Two docs per sample, stage 1 (P/N) then stage 2 (A-D), each with its own oracle and chance replies.

    The pair is adjacent so that ``--limit 2k`` keeps k whole samples. Stage 2 of an E_NoError sample
    has no right answer (the sequential protocol never asks it after a correct N) and is never scored: its oracle
    reply is just a well-formed letter, so format checks (check-model) see a compliant oracle.
    """
    docs = []
    for r in records:
        no_error = r["label"] == NO_ERROR_LABEL
        docs.append(
            {
                **Record.of(r, stage=STAGE_PRESENCE).columns(),
                ORACLE_FIELD: ABSENT if no_error else PRESENT,
                CHANCE_FIELD: [PRESENT, ABSENT],
            }
        )
        docs.append(
            {
                **Record.of(r, stage=STAGE_TYPE).columns(),
                ORACLE_FIELD: ERROR_LETTERS[0] if no_error else _letter_of(r["label"]),
                CHANCE_FIELD: list(ERROR_LETTERS),
            }
        )
    return docs


# ``sample_dir``: the bundled sample data beside the task folder's utils.py (lmms_eval_plugins/task_hooks.py binds it).
def process_docs_etc(dataset: Any, sample_dir: Path | None = None):
    records = _load(dataset, sample_dir)
    return to_dataset(stamp_skipped(etc_docs(records), records))


def process_docs_epd(dataset: Any, sample_dir: Path | None = None):
    records = _load(dataset, sample_dir)
    return to_dataset(stamp_skipped(epd_docs(records), records))


# ------------------------------------------------------------------------------------------- prompts


def prompt_text(doc: Mapping[str, Any], stage: str) -> str:
    return _prompt_text(record_of(doc), stage)


def _prompt_text(record: Record, stage: str) -> str:
    # str.format fills the template only: braces inside the question or chain are kept as written.
    return PROMPTS[stage].format(question=record.question, error_reason=record.error_reason)


def _stage(record: Record, task: str) -> str:
    if task == "etc":
        return "etc"
    if record.stage is None:
        raise DataError(
            "an EPD doc has no stage", record=record.question_id, fix="build EPD docs with mmerror's process_docs_epd"
        )
    return record.stage


def _image(record: Record) -> list:
    return [load_image(record.image_path, record_id=record.question_id)]


def doc_to_visual(doc: Mapping[str, Any]) -> list:
    return _image(record_of(doc))


def _doc_to_messages(doc: Mapping[str, Any], task: str) -> list[dict[str, Any]]:
    # One user turn, the image before the prompt (official runner._build_message).
    record = record_of(doc)
    return interleaved_messages(
        "", [FrameGroup("", _image(record), kind="image")], _prompt_text(record, _stage(record, task))
    )


def doc_to_text_etc(doc, lmms_eval_specific_kwargs=None):
    return prompt_text(doc, "etc")


def doc_to_text_epd(doc, lmms_eval_specific_kwargs=None):
    record = record_of(doc)
    return _prompt_text(record, _stage(record, "epd"))


def doc_to_messages_etc(doc, lmms_eval_specific_kwargs=None):
    return _doc_to_messages(doc, "etc")


def doc_to_messages_epd(doc, lmms_eval_specific_kwargs=None):
    return _doc_to_messages(doc, "epd")


# ------------------------------------------------------------------------------------------- parsing

# The official parser also reads an "Output: X" line (the prompts end with "Output: one letter only").
_OUTPUT_LABEL = re.compile(r"(?im)^([ \t]*)output\b")
_STRIP = " \t\r\n.:!?;,\"'()[]{}"

# Robust fallbacks, tried only when the core rules (parse_option_letter) find nothing: a reply they
# read keeps its reading, and one they call ambiguous, empty or outside the options stays unparsed.
# Prose letters must be uppercase ("a reasoning error" names no option A).
_FALLBACK_ERRORS = ("no option letter found",)
# "the answer is B", "Answer: (B)", "my choice: option B", "I choose B", "classified as B", "so this is B";
# the last one wins
_ANSWER_PHRASE = (
    r"(?i:\b(?:(?:final|correct|right|best|my)\s+(?:answer|option|choice)|answer|error\s+type|error\s+category"
    r"|classification|decision|verdict|output|selection)(?:\s+(?:is|would\s+be|should\s+be|will\s+be))?"
    r"|\bi(?:\s+would|\s+will|'d|'ll)?\s+(?:choose|select|pick|go\s+with)|\b(?:classified\s+as|falls\s+under|corresponds\s+to)"
    r"|\b(?:it|this)(?:'s|\s+is|\s+would\s+be)|答案(?:是|为)?)"
    r"\s*(?:[:=\-–—]\s*)?(?:(?i:option|choice|category|letter)\s*)?"  # every optional piece starts with a non-space
)
_CLOSE = r"(?![A-Za-z0-9_])"
_PRESENCE_NAME_PATTERNS = {ABSENT: r"no[\s_\-]*errors?", PRESENT: r"errors?[\s_\-]+present"}
# Category names as the prompt spells them, with spaces, underscores or hyphens; "Knowledge Application"
# too (the paper's other name for D).
_TYPE_NAME_KEYS = ("visual", "reasoning", "question", "knowledge")  # each name holds one: a quick pre-check
_TYPE_NAME_PATTERNS = {
    "A": r"visual[\s_\-]+perception(?:[\s_\-]+error)?",
    "B": r"reasoning[\s_\-]+error",
    "C": r"question[\s_\-]+comprehension(?:[\s_\-]+error)?",
    "D": r"knowledge[\s_\-]+(?:deployment|application)(?:[\s_\-]+error)?",
}
# EPD stage 1 in a sentence: the reply opens with it ("There is no error in the reasoning.").
_NO_ERROR_SENTENCE = re.compile(
    r"(?:no[,.!]?\s+)?(?:there\s+(?:is|are)\s+no|there's\s+no|i\s+(?:found|find|see|detect)\s+no|no"
    r"|(?:the\s+)?reasoning(?:\s+chain)?\s+(?:contains|has)\s+no)\s+(?:errors?|mistakes?)\b"
    r"|(?:no[,.!]?\s+)?(?:the\s+)?reasoning(?:\s+chain)?\s+is\s+(?:fully\s+|completely\s+|entirely\s+)?"
    r"(?:correct|valid|sound|error[\s\-]free)\b",
    re.IGNORECASE,
)
_ERROR_SENTENCE = re.compile(
    r"(?:yes[,.!]?\s+)?(?:there\s+(?:is|are)\s+(?:an?|one|some|at\s+least\s+one)|there's\s+(?:an?|one)"
    r"|(?:the\s+)?reasoning(?:\s+chain)?\s+(?:contains|has)\s+(?:an?|one|at\s+least\s+one))\s+(?:\w+\s+)?(?:errors?|mistakes?)\b"
    r"|(?:yes[,.!]?\s+)?(?:the\s+)?reasoning(?:\s+chain)?\s+is\s+(?:incorrect|wrong|flawed|erroneous)\b"
    r"|(?:yes[,.!]?\s+)?(?:an?\s+)?error\s+is\s+present\b",
    re.IGNORECASE,
)
# A sentence answer is refused when the reply also says the opposite or qualifies it.
_CONTRARY = {
    ABSENT: re.compile(
        r"\b(?:but|however|except|although|though|incorrect|wrong|flawed|error\s+present)\b", re.IGNORECASE
    ),
    PRESENT: re.compile(r"\bno\s+errors?\b|\b(?:is|are)\s+(?:fully\s+|completely\s+)?correct\b", re.IGNORECASE),
}


class _Fallback:
    """The robust rules for one option set (compiled once), in order: the last answer phrase; an
    ``Answer:`` line holding one letter in either case; a category name after an answer phrase; a letter
    opening the reply ("B. The sum ..."); "Option X" mentions that agree; one category name (A-D only;
    stage 1 reads an option name only where it opens the reply)."""

    def __init__(self, letters: str, names: Mapping[str, str], name_keys: tuple[str, ...], *, names_anywhere: bool):
        self.letters = letters
        self.names_anywhere = names_anywhere
        self.name_keys = name_keys
        cls = f"[{letters}]"
        bracketed = rf"(?:[(\[]\s*)?({cls})(?:\s*[)\]])?{_CLOSE}"  # no two adjacent space runs: linear
        self.phrase = re.compile(_ANSWER_PHRASE + bracketed)
        self.mention = re.compile(rf"(?i:\b(?:option|choice|category))\s*{bracketed}")
        self.answer_line_any_case = re.compile(  # "Answer: b" (the official parser reads it too)
            rf"^[ \t]*(?:final\s*answer|answer|output)[ \t]*(?:[:\-][ \t]*)?(?:[(\[][ \t]*)?([{letters}{letters.lower()}])"
            rf"(?:[ \t]*[)\]])?[ \t]*(?:[.!][ \t]*)?$",
            re.IGNORECASE | re.MULTILINE,
        )
        self.leading = re.compile(rf"[(\[]?({cls})(?:[)\]]|\s*(?:[.:,\-–—(_]|\n|$))")
        self.leading_name = re.compile(
            rf"(?:{'|'.join(f'(?P<{letter}>{pattern})' for letter, pattern in names.items())})"
            r"(?=[ \t]*(?:[.:,;!\-–—(\n]|$))",
            re.IGNORECASE,
        )  # "No Error." not "No error in step 1"
        self.names = {
            letter: re.compile(rf"(?<![A-Za-z0-9]){pattern}(?![A-Za-z0-9])", re.IGNORECASE)
            for letter, pattern in names.items()
        }
        self.phrase_name = re.compile(_ANSWER_PHRASE + r"(.{0,80})")

    def _name_in(self, text: str) -> str | None:
        hits = {letter for letter, rx in self.names.items() if rx.search(text)}
        return hits.pop() if len(hits) == 1 else None

    def __call__(self, text: str) -> str | None:
        # quick substring pre-checks skip the regex passes that cannot match (most of a hostile reply's cost)
        low = text.lower()
        has_letter = any(c in text for c in self.letters)
        may_name = any(k in low for k in self.name_keys)
        last = None
        for last in self.phrase.finditer(text) if has_letter else ():
            pass
        if last is not None:
            return last.group(1)
        line = None
        for line in self.answer_line_any_case.finditer(text) if "answer" in low or "output" in low else ():
            pass
        if line is not None:
            return line.group(1).upper()
        for named in reversed(
            list(self.phrase_name.finditer(text))[-8:] if may_name else []
        ):  # "Answer: Reasoning Error"
            hit = self._name_in(named.group(1))
            if hit:
                return hit
        lead = self.leading.match(text)
        if lead:
            return lead.group(1)
        mentioned = {m.group(1) for m in self.mention.finditer(text)} if has_letter else set()
        if len(mentioned) == 1:
            return mentioned.pop()
        if self.names_anywhere:
            return self._name_in(text) if may_name else None
        opening = self.leading_name.match(text)
        return opening.lastgroup if opening else None


_TYPE_FALLBACK = _Fallback(ERROR_LETTERS, _TYPE_NAME_PATTERNS, _TYPE_NAME_KEYS, names_anywhere=True)
# "no error" inside prose is not read (it can invert the answer: "no error in step 1, but step 3 ...")
_PRESENCE_FALLBACK = _Fallback(PRESENT + ABSENT, _PRESENCE_NAME_PATTERNS, ("error",), names_anywhere=False)


# The fallbacks read a long reply's first and last characters only: a prose answer opens or closes the
# reply, and the bound keeps their many regex passes cheap on a megabyte of hostile text.
_FALLBACK_WINDOW = 2000


def _fallback_text(text: str) -> str:
    """The reply as the fallbacks read it: reasoning removed, markup removed, full-width forms folded."""
    body = strip_reasoning(text)
    if len(body) > 2 * _FALLBACK_WINDOW:
        body = body[:_FALLBACK_WINDOW] + "\n" + body[-_FALLBACK_WINDOW:]
    return clean_markup(unicodedata.normalize("NFKC", body)).strip()


def _robust(text: str, letters: str, names: Mapping[str, str], fallback: _Fallback) -> Parsed[str]:
    parsed = parse_option_letter(_OUTPUT_LABEL.sub(r"\1Answer", text), letters, names=names)
    if parsed.ok or parsed.error not in _FALLBACK_ERRORS:
        return parsed
    folded = unicodedata.normalize("NFKC", text)
    if folded != text:  # "Ｂ", "（B）", "答案：B"
        again = parse_option_letter(_OUTPUT_LABEL.sub(r"\1Answer", folded), letters, names=names)
        if again.ok or again.error not in _FALLBACK_ERRORS:
            return again
    hit = fallback(_fallback_text(text))
    return Parsed.success(hit) if hit else parsed


def parse_type(text: Any) -> Parsed[str]:
    """An A-D answer (ETC and EPD stage 2), robust; see README.md ("Answer parsing")."""
    text = text if isinstance(text, str) else ("" if text is None else str(text))
    return _robust(text, ERROR_LETTERS, {c: LABELS[c] for c in ERROR_LETTERS}, _TYPE_FALLBACK)


def parse_presence(text: Any) -> Parsed[str]:
    """A P/N answer (EPD stage 1): the A-D rules with letters P and N and the option names ("No Error",
    "Error Present"), the official whole-reply words "none" (N) and "error" (P), and a reply that opens
    with a plain sentence saying so ("There is no error in the reasoning.") unless it also says the
    opposite or qualifies it ("but", "however", ...); see README.md."""
    text = text if isinstance(text, str) else ("" if text is None else str(text))
    parsed = _robust(text, PRESENT + ABSENT, PRESENCE_NAMES, _PRESENCE_FALLBACK)
    if parsed.ok:
        return parsed
    word = clean_markup(strip_reasoning(text)).strip(_STRIP).casefold()
    if word in PRESENCE_WORDS:
        return Parsed.success(PRESENCE_WORDS[word])
    if parsed.error not in _FALLBACK_ERRORS:
        return parsed
    body = _fallback_text(text)
    for letter, sentence in ((ABSENT, _NO_ERROR_SENTENCE), (PRESENT, _ERROR_SENTENCE)):
        if sentence.match(body) and not _CONTRARY[letter].search(body):
            return Parsed.success(letter)
    return parsed


def official_type(text: Any) -> str | None:
    """The official parser's A-D letter (ETC and EPD stage 2), None when it parses nothing."""
    return official_letter(text, ERROR_LETTERS, {c: LABELS[c] for c in ERROR_LETTERS})


# ------------------------------------------------------------------------------------------- scoring


def _common(record: Record) -> dict[str, Any]:
    return {
        "question_id": record.question_id,
        "domain": record.domain,
        "subdomain": record.subdomain,
        "label": record.label,
    }


def score_etc(doc: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """Per-sample item (also what the logs show): gold/pred label names, correctness, parse failure reason."""
    record = record_of(doc)
    parsed = parse_type(response)
    pred = LABELS[parsed.value] if parsed.ok else None
    correct = pred == record.label
    official = None if official_failure(response) else official_type(response)  # the runner's failure string
    official_pred = LABELS[official] if official else None
    # score (and the headline, filled by item_values from the spec's item_score): the 0/1 lmms-eval's own
    # clustered standard error and --baseline read (score_key)
    return {
        **_common(record),
        "gold": record.label,
        "pred": pred,
        "correct": correct,
        "parse_error": parsed.error,
        "score": float(correct),
        "official_pred": official_pred,
        "official_correct": official_pred == record.label,
        OFFICIAL_NOT_ASKED_FIELD: record.official_not_asked,
    }


def score_epd_stage(doc: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """Per-request item of EPD: stage 1 gold/pred are P/N, stage 2 gold/pred are label names
    (stage 2 of an E_NoError sample has no gold). The sample's verdict comes from :func:`replay_epd`."""
    record = record_of(doc)
    stage = _stage(record, "epd")
    no_error = record.label == NO_ERROR_LABEL
    if stage == STAGE_PRESENCE:
        parsed = parse_presence(response)
        gold, pred = (ABSENT if no_error else PRESENT), parsed.value
        official = official_presence(response)
    else:
        parsed = parse_type(response)
        gold, pred = (None if no_error else record.label), (LABELS[parsed.value] if parsed.ok else None)
        official = LABELS[letter] if (letter := official_type(response)) else None
    return {
        **_common(record),
        "stage": stage,
        "gold": gold,
        "pred": pred,
        "correct": pred is not None and pred == gold,
        "parse_error": parsed.error,
        "official_pred": official,
    }


def process_results_etc(doc, results):
    response = results[0] if results else ""
    return item_values(spec.ETC_TEMPLATE, score_etc(doc, response), [response], doc=doc)


def process_results_epd(doc, results):
    response = results[0] if results else ""
    return item_values(spec.EPD_TEMPLATE, score_epd_stage(doc, response), [response], doc=doc)


# What the task YAMLs name (lmms_eval_plugins/task_hooks.py adds the aggregations from the spec).
HOOKS = (
    "process_docs_etc",
    "process_docs_epd",
    "doc_to_visual",
    "doc_to_text_etc",
    "doc_to_text_epd",
    "doc_to_messages_etc",
    "doc_to_messages_epd",
    "process_results_etc",
    "process_results_epd",
)
