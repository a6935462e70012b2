"""``--model random``: the papers' "Random Choice" row, a seeded chance baseline.

Each doc lists the replies a chance answerer picks from (``chance_responses``: one per option, in the
format the prompt asks for). The pick depends only on ``seed``, the task name and the doc id, so two
runs, or two processes, give the same answers.
"""

from __future__ import annotations

import hashlib
import random

from lmms_eval.api.instance import Instance

from lmms_eval_plugins.models._base import DocAnsweringModel
from lmms_eval_plugins.doc_fields import CHANCE_FIELD


def chance_pick(options: list[str], *, seed: int, task: str, doc_id: int) -> str:
    """Pick one option, deterministically for (seed, task, doc_id). Empty options give ''."""
    if not options:
        return ""
    digest = hashlib.sha256(f"{seed}:{task}:{doc_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big")).choice(list(options))


class RandomChoice(DocAnsweringModel):
    MODEL_NAME = "random"
    is_simple = True

    def __init__(self, seed: int | str = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.seed = int(seed)

    def answer(self, request: Instance, doc: dict) -> str:
        doc_id, task, _split = request.args[-3:]
        return chance_pick(list(doc.get(CHANCE_FIELD) or []), seed=self.seed, task=task, doc_id=int(doc_id))


class RandomChoiceChat(RandomChoice):
    is_simple = False
