"""Keeping API keys out of every text that leaves the judge runtime (logs, errors, cache rows, reports)."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote, quote_plus


def _base64_cores(secret: bytes) -> list[str]:
    """The base64 text that ``secret`` becomes wherever it sits in an encoded byte string: for each of
    the three alignments, the characters that depend on the secret's bytes alone (standard alphabet)."""
    cores = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + secret).decode("ascii")
        first = (shift * 8 + 5) // 6  # characters that still hold bits of the bytes before the secret
        last = (shift + len(secret)) * 8 // 6  # characters made of whole secret bits
        cores.append(encoded[first:last])
    return cores


def encoded_forms(secret: str) -> set[str]:
    """``secret`` as it may be echoed back: raw, URL-encoded (``%XX`` and ``+`` for space, either
    hex case), and base64 at any alignment, standard or URL-safe, padded or not (the padding is not
    part of what is matched)."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret, safe="").lower()}
    forms |= {quote(secret, safe="/:"), quote_plus(secret)}
    for core in _base64_cores(secret.encode("utf-8")):
        forms |= {core, core.translate(str.maketrans("+/", "-_"))}
    return {f for f in forms if len(f) >= 4}


class Redactor:
    """Replaces every secret it has seen (API keys), in the encoded forms of :func:`encoded_forms`,
    with ``***`` in text leaving the runtime."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._forms: list[str] = []  # longest first: a form inside another is replaced after it

    def add(self, secret: str | None) -> None:
        if secret and secret != "EMPTY" and len(secret) >= 4 and secret not in self._secrets:
            self._secrets.add(secret)
            self._forms = sorted(set(self._forms) | encoded_forms(secret), key=len, reverse=True)

    def __call__(self, text: Any) -> Any:
        if not isinstance(text, str):
            return text
        for form in self._forms:
            if form in text:
                text = text.replace(form, "***")
        return text
