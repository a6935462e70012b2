"""Keeping API keys out of every text that leaves the judge runtime (logs, errors, cache rows, reports)."""

from __future__ import annotations

from lmms_eval_plugins.safe_text import Redactor, encoded_forms

# One implementation of the encoded forms and of the redactor (lmms_eval_plugins/safe_text.py); the judges keep
# importing them from here. A judge's Redactor replaces its keys only (forms=False): replies are parsed redacted.
__all__ = ["Redactor", "encoded_forms"]
