"""Shared plumbing for models that answer from the doc itself rather than from pixels."""

from __future__ import annotations

import difflib
import inspect
from typing import Any

import torch
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms

from lmms_eval_plugins.errors import DataError


def model_arg_names(cls: type) -> list[str]:
    """The ``--model_args`` keys a plugin model class takes: its constructors' named parameters."""
    names: list[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is lmms or klass is object:
            continue
        for name, param in inspect.signature(init).parameters.items():
            if name != "self" and param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL) and name not in names:
                names.append(name)
    return names


def unknown_model_args(cls: type, unknown: list[str], name: str = "") -> DataError:
    """The error for ``--model_args`` keys a model class does not take: each named, with the closest known key."""
    known = model_arg_names(cls)
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
        hints.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    name = name or getattr(cls, "MODEL_NAME", "") or cls.__name__
    return DataError(
        f"--model_args: {', '.join(hints)} {'is not an argument' if len(unknown) == 1 else 'are not arguments'} "
        f"of --model {name}",
        fix=f"spell the key as the class does; its arguments: {', '.join(known) or 'none'}",
    )


class DocAnsweringModel(lmms):
    """Base for models that look up the doc behind each request.

    Simple and chat requests both end with ``(doc_id, task, split)`` in ``Instance.args``.
    """

    # what lmms-eval itself passes every model class (evaluator.simple_evaluate), beside --model_args
    LMMS_EVAL_ARGS = frozenset({"batch_size", "max_batch_size", "device"})

    def __init__(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - self.LMMS_EVAL_ARGS)
        if unknown:
            raise unknown_model_args(type(self), unknown)
        super().__init__()
        self.batch_size_per_gpu = 1

    @property
    def device(self) -> torch.device:
        """Where lmms-eval's evaluator puts this rank's request count before gathering (several processes)."""
        accelerator = getattr(self, "accelerator", None)
        return accelerator.device if accelerator is not None else torch.device("cpu")

    def doc_for(self, request: Instance) -> dict:
        doc_id, task, split = request.args[-3:]
        try:
            return self.task_dict[task][split][doc_id]
        except (KeyError, IndexError) as exc:  # pragma: no cover - lmms-eval always fills task_dict
            raise RuntimeError(f"{type(self).__name__}: no doc {doc_id} in task {task!r} split {split!r}") from exc

    def answer(self, request: Instance, doc: dict) -> str:
        raise NotImplementedError

    def generate_until(self, requests: list[Instance]) -> list[str]:
        return [self.answer(request, self.doc_for(request)) for request in requests]

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        raise NotImplementedError(f"{type(self).__name__} only answers generate_until requests")

    def generate_until_multi_round(self, requests: list[Instance]) -> list[str]:
        return self.generate_until(requests)
