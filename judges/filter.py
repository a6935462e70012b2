"""lmms-eval integration: the judging filter and the helpers a task's ``process_results`` and
aggregation functions use.

lmms-eval builds a task's filters when it constructs the task (before any inference) and calls
``Filter.apply(resps, docs)`` once with all responses of the task, before ``process_results``.
:class:`JudgeFilter` therefore checks the judge configuration in ``__init__`` (a missing endpoint
stops the run before inference) and judges every response, concurrently and through the cache, in
``apply``.  A task YAML::

    filter_list:
      - name: none
        filter:
          - function: !function utils.JudgeFilter
            judge: semantic_match
            default_model: gpt-4o
            item_fn: !function utils.judge_item

Each document's filtered response is ``[JudgedResponse(text=response, judge={...outcome...})]``:
a ``dict`` subclass (JSON-serialisable, so lmms-eval's logged samples show the verdict or the judge
error) whose ``strip()`` returns itself, because lmms-eval strips ``generate_until`` responses
before the task's ``process_results`` sees them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lmms_eval.api.filter import Filter
from loguru import logger

from lmms_eval_plugins.compat import frames
from lmms_eval_plugins.filtered import FilteredDict
from lmms_eval_plugins.outcome import NOT_JUDGED, request_failure

from .base import (
    JudgeConfigError,
    JudgeItem,
    JudgeOutcome,
    LLMJudge,
)
from .endpoint import (
    resolve_endpoint,
    resolve_model,
)
from .registry import load_judge_class, offline_selected, resolve_judge_name
from .runtime import (
    RuntimeSettings,
    max_error_rate_from_env,
    sampling_from_env,
)
from .session import announce_judge, announce_unavailable, get_runtime, judging_deferred
from .verdicts import (  # noqa: F401  (the process_results and aggregation helpers, re-exported)
    JudgedScore,
    aggregate_judged,
    check_error_rate,
    judged_mean,
    judged_parts,
)


class JudgedResponse(FilteredDict):
    """One judged response: ``{"text": response, "judge": {...outcome...}}``, a plain ``dict``.

    Two lmms-eval 0.7.3 behaviours shape it (:mod:`lmms_eval_plugins.filtered`): ``ConfigurableTask.process_results``
    calls ``.strip()`` on every ``generate_until`` response before the task's own ``process_results``
    runs, so ``strip()`` returns the object unchanged; and the sample logger ``str()``s every filtered
    response, so ``str()`` gives JSON.  Everything else sees an ordinary dict.
    """

    @property
    def text(self) -> str:
        return str(self.get("text", ""))


ItemFn = Callable[[str, Any], "JudgeItem | Mapping[str, Any] | None"]


def default_item_fn(response: str, doc: Mapping[str, Any]) -> JudgeItem:
    """Question/answer/scoring_points straight from the doc's fields of those names."""
    doc = doc or {}
    return JudgeItem(
        question=str(doc.get("question", "")),
        prediction=response,
        reference=str(doc.get("answer", "")),
        scoring_points=doc.get("scoring_points"),
    )


class JudgeFilter(Filter):
    """Judges every response of a task.  See the module docstring for the YAML.

    Options (YAML keys next to ``function``):
      judge          entry-point name of the judge (``LMMS_EVAL_PLUGINS_JUDGE=offline`` selects ``<judge>_offline``)
      default_model  judge model unless ``LMMS_EVAL_PLUGINS_JUDGE_MODEL`` is set
      item_fn        ``(response_text, doc) -> JudgeItem | dict | None``; None: nothing to judge
      sampling       dict overriding the judge's sampling parameters (part of the cache key; null removes one);
                     ``LMMS_EVAL_PLUGINS_JUDGE_SAMPLING`` (JSON) is merged over it
      concurrency    overrides ``LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY``
      judge_all      judge every response of a document (``repeats``), not only the first
      report_path    where to write the accounting JSON (else ``LMMS_EVAL_PLUGINS_JUDGE_REPORT``, else next to the cache)
      cache_path     overrides ``LMMS_EVAL_PLUGINS_JUDGE_CACHE``

    A benchmark's hooks module binds ``JudgeFilter = JudgeFilter.for_benchmark(BENCHMARK, __name__)``: the filter
    is then told the instructions its LLM judge applies (the spec's ``judge_prompt``), in an installed
    package and in an exported task folder alike; nothing searches for them.
    """

    told_prompt: str | None = None  # the task's judge instructions (for_benchmark); None: the judge looks them up

    @classmethod
    def for_benchmark(cls, spec: Any, module: str) -> type[JudgeFilter]:
        """This filter told ``spec``'s judge instructions (its ``judge_prompt``), as a class lmms-eval can
        build from a YAML (``!function utils.JudgeFilter``). ``module``: the hooks module that binds it
        (``__name__``), so the class pickles by that name."""
        told = type(cls.__name__, (cls,), {"told_prompt": getattr(spec, "judge_prompt", None) or None})
        told.__qualname__ = cls.__qualname__
        told.__module__ = module
        return told

    def __init__(
        self,
        judge: str | None = None,
        default_model: str | None = None,
        item_fn: ItemFn | None = None,
        sampling: Mapping[str, Any] | None = None,
        concurrency: int | None = None,
        judge_all: bool = False,
        report_path: str | None = None,
        cache_path: str | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise JudgeConfigError(
                f"JudgeFilter: unknown option(s) {sorted(unknown)}; see lmms_eval_plugins.judges.JudgeFilter"
            )
        if not judge:
            raise JudgeConfigError("JudgeFilter needs `judge: <name>` (e.g. semantic_match or rubric)")
        if item_fn is not None and not callable(item_fn):
            raise JudgeConfigError(
                f"JudgeFilter: item_fn must be callable (use !function utils.judge_item), got {item_fn!r}"
            )
        self.requested = judge
        self.item_fn: ItemFn = item_fn or default_item_fn
        self.judge_all = bool(judge_all)
        self.report_path = report_path
        self.endpoint, self.model = None, None
        # Why this run cannot judge (no endpoint, unwritable cache...): the model still runs, and the
        # judged metrics stay unscored until `lmms-eval-plugins score` finishes them. Never fatal here:
        # one task's judge must not cost the other tasks, or the model's outputs, of the run.
        self.unavailable: str | None = None
        try:
            self._configure(judge, default_model, sampling, concurrency, cache_path)
        except JudgeConfigError as exc:
            self.unavailable = str(exc)
            if not judging_deferred():  # a --predict_only run needs no endpoint: nothing to warn about
                announce_unavailable(judge, self.unavailable)  # said once per run, however often filters are built

    def _configure(
        self,
        judge: str,
        default_model: str | None,
        sampling: Mapping[str, Any] | None,
        concurrency: int | None,
        cache_path: str | None,
    ) -> None:
        self.offline = offline_selected()
        self.judge_name = resolve_judge_name(judge, offline=self.offline)
        factory = load_judge_class(self.judge_name)
        is_llm = isinstance(factory, type) and issubclass(factory, LLMJudge)
        if is_llm:
            told = {"system_prompt": self.told_prompt} if self.told_prompt and _takes_prompt(factory) else {}
            self.judge = factory(sampling={**dict(sampling or {}), **sampling_from_env()}, **told)
        else:
            self.judge = factory()
        self.settings = RuntimeSettings.from_env(concurrency=concurrency)
        self.max_error_rate = max_error_rate_from_env()
        runtime = get_runtime(cache_path)
        # the filter keeps only the path (no locks or connections: it stays copyable and picklable)
        self.cache_path = str(runtime.cache_path)
        if self.judge.offline:
            self.model = None
            announce_judge(self.judge.name, self.judge.version, None, None)
            logger.warning(
                f"judge: using the OFFLINE judge {self.judge_name!r} for {judge!r} — {self.judge.fidelity}. "
                "Scores are not comparable with LLM-judged results."
            )
        else:
            self.endpoint = resolve_endpoint(self.judge_name)
            self.model = resolve_model(default_model)
            try:
                runtime.cache.check_writable()
            except OSError as exc:
                raise JudgeConfigError(f"{exc}. Set LMMS_EVAL_PLUGINS_JUDGE_CACHE to a writable file path.") from exc
            # where the judge traffic goes: once per run per judge, model and endpoint, before inference
            announce_judge(self.judge.name, self.judge.version, self.model, self.endpoint)
            logger.debug(
                f"judge: {self.judge_name} cache {runtime.cache_path}; concurrency {self.settings.concurrency}"
            )

    # lmms-eval calls this once per task with all responses
    @property
    def runtime(self):
        return get_runtime(self.cache_path)

    def not_judging(self) -> str | None:
        """Why this filter makes no judge calls in this run (None: it judges)."""
        if judging_deferred():
            return f"{NOT_JUDGED}: --predict_only run (finish it with lmms-eval-plugins score)"
        if self.unavailable:
            return f"{NOT_JUDGED}: {self.unavailable}"
        return None

    def apply(self, resps: Sequence[Any], docs: Any) -> list[list[JudgedResponse]]:
        # the caller is lmms-eval's FilterEnsemble.apply: its instances say which doc each response answers
        docs_aligned = _aligned_docs(resps, docs, frames.caller_instances())
        not_judging = self.not_judging()
        slots: list[tuple[int, str]] = []  # (doc position, response text) per judged response
        items: list[JudgeItem | None] = []
        item_errors: dict[int, str] = {}
        for pos, (resp, doc) in enumerate(zip(resps, docs_aligned)):
            texts = list(resp) if isinstance(resp, (list, tuple)) else [resp]
            texts = [t if isinstance(t, str) else ("" if t is None else str(t)) for t in texts] or [""]
            for text in texts if self.judge_all else texts[:1]:
                slot = len(slots)
                slots.append((pos, text))
                if request_failure(text):  # the task leaves it unscored: no judge call for a failed request
                    items.append(None)
                    continue
                try:
                    item = self.item_fn(text, doc)
                    if isinstance(item, Mapping):
                        item = JudgeItem(**item)
                    if item is not None and not isinstance(item, JudgeItem):
                        raise TypeError(f"item_fn returned {type(item).__name__}, expected JudgeItem, dict or None")
                except Exception as exc:
                    item_errors[slot] = f"item_fn failed: {exc!r}"
                    logger.error(f"judge: item_fn failed on document {pos}: {exc!r}")
                    item = None
                items.append(item)
        live = [i for i in range(len(items)) if i not in item_errors]
        if not_judging:
            # Unscored, not judged: no call, no accounting; what item_fn found nothing to judge stays skipped.
            name, version = (self.judge.name, self.judge.version) if hasattr(self, "judge") else (self.requested, "?")
            outcomes = [
                JudgeOutcome(name, version, self.model, skipped=True)
                if items[i] is None
                else JudgeOutcome(name, version, self.model, error=not_judging)
                for i in live
            ]
            why = "judge not available (said above)" if self.unavailable and not judging_deferred() else not_judging
            logger.warning(f"judge {name}: {why}; {sum(o.error is not None for o in outcomes)} responses left unscored")
        else:
            outcomes = self.runtime.judge_items(
                self.judge, [items[i] for i in live], model=self.model, endpoint=self.endpoint, settings=self.settings
            )
        by_slot: dict[int, JudgeOutcome] = dict(zip(live, outcomes))
        for slot, reason in item_errors.items():
            by_slot[slot] = JudgeOutcome(self.judge.name, self.judge.version, self.model, error=reason)
        out: list[list[JudgedResponse]] = [[] for _ in resps]
        for slot, (pos, text) in enumerate(slots):
            out[pos].append(JudgedResponse(text=text, judge=by_slot[slot].to_dict()))
        if not_judging:
            return out
        if item_errors:
            self.runtime.accounting.bump(self.judge, self.model, judge_errors=len(item_errors))
        try:
            path = self.runtime.write_report(self.report_path)
            logger.info(f"{self.runtime.summary()}\njudge accounting written to {path}")
        except OSError as exc:
            logger.warning(f"judge: could not write the accounting report: {exc}")
        n_err = sum(1 for o in by_slot.values() if o.error)
        if n_err and by_slot:
            rate = n_err / max(1, sum(1 for o in by_slot.values() if not o.skipped))
            log = logger.error if rate > self.max_error_rate else logger.warning
            log(
                f"judge {self.judge.name}: {n_err} judge error(s) in {len(by_slot)} responses ({rate:.1%}); threshold {self.max_error_rate:.1%}"
            )
        return out


def _takes_prompt(factory: Any) -> bool:
    """Whether a judge class takes ``system_prompt`` (the built-in LLM judges do; a third-party one may not)."""
    import inspect

    try:
        return "system_prompt" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


def _aligned_docs(resps: Sequence[Any], docs: Any, instances: Any) -> list[Any]:
    """The document of each response; ``instances`` are those of the calling ``FilterEnsemble.apply``
    (or None when they could not be read).

    lmms-eval 0.7.3 offers a filter no supported way to learn which document a response answers.
    ``ConfigurableTask.apply_filters`` (``lmms_eval/api/task.py``) calls
    ``FilterEnsemble.apply(self._instances, self.task_docs)``, which (``lmms_eval/api/filter.py``)
    calls each ``Filter.apply(resps, docs)`` with ``resps = [inst.resps for inst in instances]``: the
    replies of this process's instances only (rank-sharded under ``accelerate launch``, cut by
    ``--limit``/``--offset``), while ``docs`` is the task's full document list. A positional zip is
    therefore wrong with several ranks or ``--offset``. The instances, whose ``doc_id`` indexes
    ``docs``, exist only as the ``instances`` argument of that calling ``FilterEnsemble.apply``; a
    filter is built from the YAML's keyword arguments alone (``build_filter_ensemble``) and holds no
    reference to its task. So the caller's frame is read (compatibility entry ``filter-instances``,
    :func:`lmms_eval_plugins.compat.frames.caller_instances`): when it holds ``instances`` matching the
    responses one to one with valid doc ids, they align the documents; otherwise position does (right
    for a plain run and for ``--limit``). If lmms-eval ever passes the instances or doc ids to
    ``Filter.apply``, use them instead.
    """
    n = len(resps)
    if docs is None:
        return [None] * n
    try:
        if (
            instances is not None
            and len(instances) == n
            and all(isinstance(getattr(x, "doc_id", None), int) for x in instances)
        ):
            if all(0 <= x.doc_id < len(docs) for x in instances):
                return [docs[x.doc_id] for x in instances]
    except Exception:  # pragma: no cover - defensive
        pass
    if len(docs) < n:
        raise JudgeConfigError(f"JudgeFilter: {n} responses but only {len(docs)} documents; cannot align them")
    return [docs[i] for i in range(n)]
