"""``--model replay``: answers every request with the reply a logged run stored for it.

``lmms-eval --model replay --model_args samples=OUT/.../<datetime>_results.json --tasks ...`` reads
the ``<datetime>_samples_<task>.jsonl`` files lmms-eval wrote beside that results file (``--log_samples``)
and gives each request the model's reply stored for its document. lmms-eval then applies the task's
filters (judges included), ``process_results`` and aggregations exactly as in a normal run: this is
how ``lmms-eval-plugins score`` re-derives a run's metrics without the model.

Which stored value is the reply: lmms-eval logs ``resps`` (what the task's filters received, before
its reasoning-tag stripping) and ``filtered_resps`` (after), drops ``resps`` when the two are equal,
unwraps lists of one and writes every element with ``str()`` (so our judge's and replay filter's dict
attachments arrive as JSON text). :func:`reply_text` undoes that.

In strict mode (model arg ``strict=true`` or ``LMMS_EVAL_PLUGINS_STRICT=1``, what ``score --strict`` sets;
the run decides it once: :func:`lmms_eval_plugins.run_state.strict_mode`) the reply is a
:class:`RawReply`: lmms-eval strips every reply's surrounding whitespace before ``process_results``
(``ConfigurableTask.process_results``, and its reasoning-tag stripping), which the official scorers
do not; a RawReply survives those ``strip()`` calls, so exact-string checks see the reply as logged.
(Reasoning blocks are still removed as the run's ``--reasoning_tags`` says.)

Every request is checked against what was logged for its document, so replies are never given to
other questions: the prompt (``input``) and, when lmms-eval attaches the doc to the request, the
``doc_hash`` (lmms-eval 0.7.3 never does: its ``doc_hash`` is the hash of ``null`` for every sample).
A mismatch, or a document with no stored reply, raises :class:`ReplayError`, naming the samples file,
the task and the doc id.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from lmms_eval.api.instance import Instance

from lmms_eval_plugins.logged_samples import (  # noqa: F401 (REPLAY_ERROR_MARK: re-exported)
    REPLAY_ERROR_MARK,
    ReplayError,
    load_samples,
    reply_text,
)
from lmms_eval_plugins.models._base import DocAnsweringModel
from lmms_eval_plugins.runs import samples_path
from lmms_eval_plugins.run_state import strict_mode


class RawReply(str):
    """A reply whose ``strip()`` keeps it as it is (module docstring: strict mode)."""

    def strip(self, chars: str | None = None) -> RawReply:
        return self


def request_values(sample: dict[str, Any], n_requests: int) -> list[Any] | None:
    """One logged value per request of the document (``resps`` if kept, else ``filtered_resps``).

    lmms-eval unwraps the per-request list only for a document with one request.
    """
    stored = sample["resps"] if "resps" in sample else sample.get("filtered_resps")
    if n_requests == 1:
        return [stored]
    return list(stored) if isinstance(stored, list) and len(stored) == n_requests else None


def replayed_fields(sample: dict[str, Any]) -> dict[str, Any]:
    """What the replay reads of a logged sample: the document's hash, the prompt and the replies (the
    document, its items and the rest stay on disk: at 100,000 samples they were most of the memory)."""
    kept = {k: sample[k] for k in ("doc_hash", "input") if k in sample}
    if "resps" in sample:
        kept["resps"] = sample["resps"]
    elif "filtered_resps" in sample:
        kept["filtered_resps"] = sample["filtered_resps"]
    return kept


def lmms_doc_hash(doc: Any) -> str:
    """``doc_hash`` exactly as lmms-eval's evaluator computes it for a logged sample."""
    from lmms_eval.utils import handle_non_serializable, hash_string

    return hash_string(json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False))


def first_difference(stored: str, now: str) -> str:
    """A short pointer to where two prompts part, for the error message."""
    at = next((i for i, (a, b) in enumerate(zip(stored, now)) if a != b), min(len(stored), len(now)))
    return f"first difference at character {at}: logged {stored[at : at + 40]!r}, now {now[at : at + 40]!r}"


class Replay(DocAnsweringModel):
    """Model args: ``samples=<path to the run's *_results.json>``."""

    MODEL_NAME = "replay"

    is_simple = True

    def __init__(self, samples: str | None = None, strict: bool | str = False, **kwargs: Any) -> None:
        # `strict` is read by the run when it starts (run_state.strict_from_run_config), not here
        super().__init__(**kwargs)
        if not samples:
            raise ReplayError("give the run to replay: --model_args samples=<path to its *_results.json>")
        self.results_path = Path(samples).expanduser().resolve()
        if not self.results_path.is_file():
            raise ReplayError(f"{self.results_path} does not exist (model arg samples= must name a *_results.json)")
        self._samples: dict[str, dict[int, dict[str, Any]]] = {}

    def samples_for(self, task: str) -> dict[int, dict[str, Any]]:
        if task not in self._samples:
            self._samples[task] = load_samples(self.results_path, task, keep=replayed_fields)
        return self._samples[task]

    def generate_until(self, requests: list[Instance]) -> list[str]:
        # lmms-eval hands over every request of the run at once; a document's request count tells how
        # its logged values are laid out (see request_values)
        per_doc = Counter((r.task_name, r.doc_id) for r in {id(r): r for r in requests}.values())
        return [self.reply(request, per_doc[(request.task_name, request.doc_id)]) for request in requests]

    def reply(self, request: Instance, n_requests: int) -> str:
        task, doc_id = request.task_name, request.doc_id
        where = f"{samples_path(self.results_path, task)}: task {task!r} doc_id {doc_id}"
        if (request.repeats or 1) > 1:
            raise ReplayError(f"{where}: the task has repeats={request.repeats}; replay answers one reply per request")
        sample = self.samples_for(task).get(doc_id)
        if sample is None:
            raise ReplayError(
                f"{where}: no reply stored for this document (the task has more documents than the run "
                "logged: its data changed, or --limit/--offset differ); re-run the model"
            )
        self.check_same_document(request, sample, where)
        values = request_values(sample, n_requests)
        text = reply_text(values[request.idx]) if values is not None and request.idx < len(values) else None
        if text is None:
            raise ReplayError(f"{where}: no reply stored for request {request.idx} of this document; re-run the model")
        return RawReply(text) if strict_mode() else text

    @staticmethod
    def check_same_document(request: Instance, sample: dict[str, Any], where: str) -> None:
        """Refuse to answer a document other than the one the reply was made for."""
        changed = (
            "the data or the task changed since the run, so the stored reply answers another question; "
            "re-run the model (or score with the data and task version of the run)"
        )
        if request.doc is not None and sample.get("doc_hash") and lmms_doc_hash(request.doc) != sample["doc_hash"]:
            raise ReplayError(f"{where}: the document differs from the logged one (doc_hash): {changed}")
        prompt, logged = (request.args[0] if request.args else None), sample.get("input")
        # `input` is the first argument of the document's first request
        if request.idx == 0 and isinstance(prompt, str) and isinstance(logged, str) and prompt != logged:
            raise ReplayError(
                f"{where}: the prompt differs from the logged one ({first_difference(logged, prompt)}): {changed}"
            )


class ReplayChat(Replay):
    is_simple = False
