"""A dict that a task's lmms-eval filter can put among its filtered responses.

Our filters attach structured data to a response: the judge's verdict (:class:`JudgeFilter`'s
``JudgedResponse``) and a group replay's result (:class:`GroupReplayFilter`'s ``GroupAttachment``).
lmms-eval 0.7.3 expects filtered responses of a ``generate_until`` task to be strings in two places:

- ``ConfigurableTask.process_results`` (``lmms_eval/api/task.py``) calls ``.strip()`` on every element
  of the filtered response list before the task's own ``process_results`` sees it;
- the sample logger (``sanitize_list`` in ``lmms_eval/utils.py``, called by
  ``lmms_eval/loggers/evaluation_tracker.py``) writes every filtered response with ``str()``.

(The evaluator's reasoning-tag stripping leaves non-strings alone.) :class:`FilteredDict` is a plain,
JSON-serialisable ``dict`` whose ``strip()`` returns the dict itself and whose ``str()`` is JSON, so
the logged samples hold JSON text (read back by :func:`lmms_eval_plugins.models.replay.reply_text`).
"""

from __future__ import annotations

import json


class FilteredDict(dict):
    """A ``dict`` that survives lmms-eval's string handling of filtered responses (module docstring)."""

    def strip(self, chars: str | None = None) -> FilteredDict:
        return self

    def __str__(self) -> str:
        return json.dumps(self, ensure_ascii=False, default=str)
