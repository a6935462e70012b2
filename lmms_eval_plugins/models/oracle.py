"""``--model oracle``: answers every request with the gold answer, in the form the task's prompt asks for.

Every task must reach its maximum score with it; this checks data wiring, parsing and scoring end to end.
"""

from __future__ import annotations

from lmms_eval.api.instance import Instance

from lmms_eval_plugins.models._base import DocAnsweringModel
from lmms_eval_plugins.doc_fields import ORACLE_FIELD


class Oracle(DocAnsweringModel):
    MODEL_NAME = "oracle"
    is_simple = True

    def answer(self, request: Instance, doc: dict) -> str:
        if ORACLE_FIELD not in doc:
            raise RuntimeError(
                f"oracle: task {request.args[-2]!r} has no {ORACLE_FIELD!r} field in its docs; "
                "only lmms-eval-plugins tasks can be run with --model oracle"
            )
        return str(doc[ORACLE_FIELD])


class OracleChat(Oracle):
    is_simple = False
