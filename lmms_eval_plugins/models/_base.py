"""Shared plumbing for models that answer from the doc itself rather than from pixels."""

from __future__ import annotations

from typing import Any

import torch
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms


class DocAnsweringModel(lmms):
    """Base for models that look up the doc behind each request.

    Simple and chat requests both end with ``(doc_id, task, split)`` in ``Instance.args``.
    """

    def __init__(self, **kwargs: Any) -> None:
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
