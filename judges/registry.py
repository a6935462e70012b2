"""Finding judges: the ``lmms_eval_plugins.judges`` entry-point group.

Built-in judges are declared in this package's ``pyproject.toml`` exactly as a third-party package
declares its own::

    [project.entry-points."lmms_eval_plugins.judges"]
    my_judge = "my_package.my_module:MyJudge"

The payload is a :class:`~lmms_eval_plugins.judges.base.Judge` subclass (or a callable returning a
judge instance).  ``register_judge`` adds one at run time (tests, notebooks).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from .base import Judge, JudgeConfigError, UnknownJudgeError

ENTRY_POINT_GROUP = "lmms_eval_plugins.judges"
OFFLINE_SUFFIX = "_offline"
ENV_JUDGE = "LMMS_EVAL_PLUGINS_JUDGE"

_runtime_registry: dict[str, Callable[..., Judge]] = {}

# The judges that ship in this package, by module path relative to it: the same classes that
# pyproject.toml declares as entry points. They are loaded from this package itself, before entry
# points, so that a vendored copy without installed metadata (a task folder written by
# ``lmms-eval-plugins export-upstream``) finds them, and never mixes its classes with those of an
# installed copy. A third-party judge cannot take one of these names.
BUILTIN_JUDGES: dict[str, str] = {
    "semantic_match": ".semantic_match:SemanticMatchJudge",
    "semantic_match_offline": ".semantic_match:OfflineSemanticMatchJudge",
    "rubric": ".rubric:RubricJudge",
    "rubric_offline": ".rubric:OfflineRubricJudge",
}


def register_judge(name: str, factory: Callable[..., Judge], *, overwrite: bool = False) -> None:
    """Register a judge class (or factory) under ``name`` for this process."""
    if not overwrite and name in _runtime_registry:
        raise JudgeConfigError(f"a judge named {name!r} is already registered in this process")
    _runtime_registry[name] = factory


def unregister_judge(name: str) -> None:
    _runtime_registry.pop(name, None)


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_judges() -> list[str]:
    """Names of all registered judges (entry points, built-ins and run-time registrations)."""
    return sorted(set(_entry_points()) | set(BUILTIN_JUDGES) | set(_runtime_registry))


def _builtin_judge(name: str) -> Callable[..., Judge]:
    module, _, attr = BUILTIN_JUDGES[name].partition(":")
    return getattr(import_module(module, __package__), attr)


def _selected(env: dict[str, str] | None) -> str:
    env = os.environ if env is None else env
    return (env.get(ENV_JUDGE) or "").strip()


def offline_selected(env: dict[str, str] | None = None) -> bool:
    """True when ``LMMS_EVAL_PLUGINS_JUDGE=offline``. The other accepted values are ``llm`` (or empty):
    each task's own judge, and the name of a registered judge: that judge for every judged task
    (``lmms-eval-plugins score --judge NAME`` re-judges a run with it)."""
    value = _selected(env)
    if value.lower() in ("", "llm", "online", "api"):
        return False
    if value.lower() == "offline":
        return True
    if value in available_judges():
        return False
    raise JudgeConfigError(
        f"{ENV_JUDGE}={value!r} is not understood; use {ENV_JUDGE}=offline, a registered judge "
        f"({', '.join(available_judges())}), or unset it to use each task's LLM judge"
    )


def resolve_judge_name(name: str, *, offline: bool | None = None, env: dict[str, str] | None = None) -> str:
    """The judge to use for a task that asks for ``name``: ``<name>_offline`` when offline is selected;
    the judge named by ``LMMS_EVAL_PLUGINS_JUDGE`` when it names one."""
    if offline is None:
        offline = offline_selected(env)
    if offline and not name.endswith(OFFLINE_SUFFIX):
        return name + OFFLINE_SUFFIX
    chosen = _selected(env)
    if not offline and chosen in available_judges():
        return chosen
    return name


def load_judge_class(name: str) -> Callable[..., Judge]:
    if name in _runtime_registry:
        return _runtime_registry[name]
    if name in BUILTIN_JUDGES:
        return _builtin_judge(name)
    eps = _entry_points()
    if name not in eps:
        known = ", ".join(available_judges()) or "none"
        hint = ""
        if not eps:
            hint = " No judge entry points are installed at all: reinstall the package (pip install -e . or pip install lmms-eval-plugins)."
        raise UnknownJudgeError(
            f"no judge named {name!r} in the entry-point group {ENTRY_POINT_GROUP!r} (registered: {known}).{hint}"
        )
    try:
        return eps[name].load()
    except Exception as exc:  # a broken third-party plugin: name it
        raise UnknownJudgeError(f"the judge entry point {name!r} ({eps[name].value}) failed to load: {exc!r}") from exc


def declared_prompt(judge: str) -> str:
    """The instructions (system prompt) that the installed benchmarks using ``judge`` declare: their
    spec's ``judge_prompt`` (a benchmark's official judging prompt lives with the benchmark; the judge
    applies it). A task is told its prompt (``JudgeFilter.for_benchmark``): this lookup serves the callers
    that judge without a task (``judge-agreement``, library calls). One text is needed: none, or two that
    differ, is a :class:`JudgeConfigError`."""
    from lmms_eval_plugins.benchmark import registry

    prompts = {b.name: b.judge_prompt for b in registry().values() if b.judge == judge and b.judge_prompt}
    if len(set(prompts.values())) == 1:
        return next(iter(prompts.values()))
    if not prompts:
        raise JudgeConfigError(
            f"no installed benchmark declares the instructions of the judge {judge!r}; fix: set "
            f"judge={judge!r} and judge_prompt=<its system prompt> in the benchmark's Benchmark spec "
            "(or reinstall the package), or give the judge its system_prompt"
        )
    raise JudgeConfigError(
        f"the benchmarks {', '.join(sorted(prompts))} declare different instructions for the judge "
        f"{judge!r}; fix: register the judge under one name per prompt"
    )


def load_judge(name: str, **kwargs: Any) -> Judge:
    """An instance of the judge registered as ``name``."""
    factory = load_judge_class(name)
    judge = factory(**kwargs)
    if not isinstance(judge, Judge):
        raise UnknownJudgeError(f"the judge entry point {name!r} did not produce a Judge (got {type(judge).__name__})")
    return judge
