"""The one redactor and the one escaper for every text the plugin prints or writes, and Markdown helpers.

Model names, task names, model args, error messages and model replies are untrusted text (SECURITY.md).

- :func:`redact`: the given secrets in every encoded form (:func:`encoded_forms`) and every credential form
  of free text, from one list (:data:`CREDENTIAL_PARTS`): ``api_key=...``, ``?key=``, Azure SAS ``sig=``,
  Azure Functions ``code=``, ``Authorization: Bearer ...``, keys inside dict-valued model args
  (``client_kwargs={'api_key': ...}``, JSON), URL userinfo. ``judges.endpoint`` refuses URLs by the same list.
- :func:`escape_controls`: C0/C1 controls and bidi overrides shown as visible escapes (``\\x1b``, ``\\u202e``),
  so stored text cannot retitle a terminal, write the clipboard, erase a line or reorder what is shown.
- :func:`md_text` / :func:`md_code`: untrusted text as Markdown text (HTML and Markdown syntax escaped) or as a
  code span whose fence is longer than any backtick run in it; both escape controls.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "***"

# ---- the one list of credential forms -------------------------------------------------------------------
# A name (model arg, query parameter, header, dict key) is a credential when one of its parts (split at
# "_", "-", ".", spaces and camelCase humps; lower-cased) is one of these ...
CREDENTIAL_PARTS = frozenset(
    (
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "pass",
        "pwd",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "cookie",
        "session",
        "signature",
        "sig",
        "bearer",
    )
)
# ... or ends with one of these (apikey, hftoken, accesskey, clientsecret) ...
CREDENTIAL_ENDINGS = ("key", "token", "secret", "password", "passwd")
# ... or is one of these whole names: Azure Functions' ``?code=`` (never ``trust_remote_code``).
CREDENTIAL_NAMES = frozenset(("code",))
# Authorization schemes: the word is kept, the credential after it is redacted.
AUTH_SCHEMES = frozenset(("bearer", "basic", "digest", "token", "negotiate", "apikey", "sharedkey", "sas"))

_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PART_SPLIT = re.compile(r"[_\-.\s]+")


def is_credential_name(name: Any) -> bool:
    """Whether ``name`` (``api_key``, ``X-Api-Key``, ``clientSecret``, ``sig``, ``code``, ...) names a credential."""
    text = str(name).strip().strip("\"'\\")
    if text.lower() in CREDENTIAL_NAMES:
        return True
    parts = [p for p in _PART_SPLIT.split(_HUMP.sub("_", text).lower()) if p]
    return any(p in CREDENTIAL_PARTS or p.endswith(CREDENTIAL_ENDINGS) for p in parts)


# ---- secrets in their encoded forms ------------------------------------------------------------------------


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
    """Replaces every secret it has been given (API keys), in the encoded forms of :func:`encoded_forms`,
    with ``***``; with ``forms=True`` also every credential form of free text (:func:`redact_forms`).

    The judges keep ``forms=False`` for replies: a verdict is parsed from the redacted reply, and a reply's
    ``key: ...`` must not change what is parsed."""

    def __init__(self, secrets: Iterable[str | None] = (), *, forms: bool = False) -> None:
        self._secrets: set[str] = set()
        self._forms: list[str] = []  # longest first: a form inside another is replaced after it
        self.forms = forms
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        if secret and secret != "EMPTY" and len(secret) >= 4 and secret not in self._secrets:
            self._secrets.add(secret)
            self._forms = sorted(set(self._forms) | encoded_forms(secret), key=len, reverse=True)

    def __call__(self, text: Any) -> Any:
        if not isinstance(text, str):
            return text
        for form in self._forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return redact_forms(text) if self.forms else text


# ---- credential forms in free text --------------------------------------------------------------------------
# All scanners are linear in the text: each starts only at a word boundary and never re-reads what it consumed.
_USERINFO = re.compile(r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]{0,31}://)([^\s/?#@\"'<>\\]+)@")
# NAME SEP, the name optionally quoted ("api_key": / 'api_key': / \"api_key\": / api_key=); not "http://"
_NAME_SEP = re.compile(r"(?<![\w.\-])(\\?[\"']?)([A-Za-z_][\w.\-]*)\1[ \t]*(?:=|:(?!//))[ \t]*")
_BARE = re.compile(r"[^\s,&;\"'}\])<>\\]+")
_STANDALONE_BEARER = re.compile(r"(?<![\w\-])(?:Bearer|BEARER)[ \t]+(?=[^\s\"'*])")
_CLOSE = {"{": "}", "[": "]", "(": ")"}


def _quoted_end(text: str, start: int, quote_mark: str) -> int:
    """End of a quoted value starting at ``start`` (after its opening quote): its closing quote, else the line's end."""
    end = text.find(quote_mark, start)
    end = len(text) if end < 0 else end
    line_end = text.find("\n", start, end)  # searched only up to the quote: linear over many short values
    return end if line_end < 0 else line_end


def _bracket_end(text: str, start: int) -> int:
    """End (exclusive) of the bracketed value opening at ``start``; the line's end when it never closes."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "\n":
            return i
        if ch in _CLOSE:
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _after_scheme(text: str, start: int, end: int) -> int:
    """``start`` moved past an Authorization scheme word (``Bearer ``) when the value begins with one."""
    word = _BARE.match(text, start, end)
    if word and word.group(0).lower() in AUTH_SCHEMES:
        pos = word.end()
        while pos < end and text[pos] in " \t":
            pos += 1
        if pos > word.end() and pos < end:
            return pos
    return start


def _value_span(text: str, i: int) -> tuple[int, int] | None:
    """(start, end) of the credential value at ``i`` (just after ``NAME=`` or ``"NAME": ``), or None."""
    if i >= len(text):
        return None
    for mark in ('\\"', "\\'", '"', "'"):
        if text.startswith(mark, i):
            start = i + len(mark)
            end = _quoted_end(text, start, mark)
            start = _after_scheme(text, start, end)
            return (start, end) if end > start else None
    if text[i] in _CLOSE:
        return i, _bracket_end(text, i)
    bare = _BARE.match(text, i)
    if not bare:
        return None
    if bare.group(0).lower() in AUTH_SCHEMES:  # Authorization: Bearer TOKEN
        pos = _after_scheme(text, i, len(text))
        token = _BARE.match(text, pos) if pos > i else None
        return (token.start(), token.end()) if token else None
    return bare.start(), bare.end()


def credential_spans(text: str) -> list[tuple[int, int]]:
    """Where credentials sit in ``text`` (sorted, not overlapping): values of credential-named fields, URL
    userinfo and standalone ``Bearer`` tokens."""
    spans: list[tuple[int, int]] = []
    for m in _USERINFO.finditer(text):
        spans.append((m.start(2), m.end(2)))
    for m in _STANDALONE_BEARER.finditer(text):
        token = _BARE.match(text, m.end())
        if token:
            spans.append((token.start(), token.end()))
    consumed = 0
    for m in _NAME_SEP.finditer(text):
        if m.start() < consumed or not is_credential_name(m.group(2)):
            continue
        span = _value_span(text, m.end())
        if span:
            spans.append(span)
            consumed = span[1]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def redact_forms(text: str) -> str:
    """``text`` with every credential form of :func:`credential_spans` replaced by ``***``."""
    out, pos = [], 0
    for start, end in credential_spans(text):
        if text[start:end] != REDACTED:
            out += [text[pos:start], REDACTED]
            pos = end
    return "".join(out) + text[pos:] if out else text


_NOT_SECRETS = frozenset(("true", "false", "none", "null", "empty", "auto"))  # flags (use_auth=True), never keys


def credential_values(text: str) -> list[str]:
    """The credential values written in ``text`` (``--model_args``, a header line): secrets for :func:`redact`
    wherever else they may be echoed (an error message, a server's reply)."""
    values = []
    for start, end in credential_spans(text):
        value = text[start:end].strip()
        if value != REDACTED and len(value) >= 4 and value.lower() not in _NOT_SECRETS:
            values.append(value)
    return values


def redact(text: Any, secrets: Iterable[str | None] = ()) -> str:
    """The one redactor: ``text`` with ``secrets`` in every encoded form and every credential form of free text
    (:data:`CREDENTIAL_PARTS`) replaced by ``***``. For console lines, results, reports and check-model."""
    return Redactor(secrets, forms=True)(str(text))


def redact_structure(value: Any) -> Any:
    """A JSON-like value (lmms-eval's model args as a dict) with its credentials hidden: a credential-named
    key's value becomes ``***`` at any depth; strings are :func:`redact`-ed; other scalars stay."""
    if isinstance(value, Mapping):
        return {k: REDACTED if is_credential_name(k) else redact_structure(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_structure(v) for v in value]
    return redact(value) if isinstance(value, str) else value


def redact_url(value: str) -> str:
    """A URL with its userinfo and its credential-like query values replaced by ``***``."""
    return redact(value)


def redact_arg(name: str, value: Any) -> str:
    """One model arg's value as it may be shown: ``***`` for a credential-like name, else :func:`redact`-ed
    (a dict value shown with its credential keys hidden)."""
    if is_credential_name(name):
        return REDACTED
    if isinstance(value, (Mapping, list, tuple)):
        import json

        return json.dumps(redact_structure(value), default=str)
    return redact(value)


def redact_model_args(
    model_args: str | Mapping[str, Any] | None, split: Callable[[str], list[str]] | None = None
) -> str:
    """``--model_args`` (the string, or lmms-eval's dict of them) with every credential-like value hidden."""
    if model_args is None:
        return ""
    if isinstance(model_args, Mapping):
        return ",".join(f"{k}={redact_arg(k, v)}" for k, v in model_args.items())
    if split is None:
        from lmms_eval_plugins.compat.private import split_model_args as split
    out = []
    for arg in split(str(model_args)):
        name, sep, value = arg.partition("=")
        out.append(f"{name}={redact_arg(name.strip(), value)}" if sep else redact(arg))
    return ",".join(out)


# ---- control characters ------------------------------------------------------------------------------------
# C0 but tab and newline, DEL, C1, and the bidi marks, embeddings, overrides and isolates.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROLS_AND_NEWLINES = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: Any, *, keep_newlines: bool = True) -> str:
    """``text`` with C0 controls (but tab and, with ``keep_newlines``, newline), DEL, C1 controls and Unicode
    bidi overrides/isolates shown as visible escapes (``\\x1b``, ``\\x07``, ``\\u202e``): for everything the
    plugin prints or writes as text."""
    return (_CONTROLS if keep_newlines else _CONTROLS_AND_NEWLINES).sub(_visible, str(text))


# ---- Markdown ------------------------------------------------------------------------------------------------
_BACKTICKS = re.compile(r"`+")
# Characters that make Markdown markup (or raw HTML) in a table cell or a line of text.
# "](" is what turns [text] into a link or an image (a tracking pixel): its parenthesis is escaped.
_MD_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "\\": "\\\\", "`": "\\`", "](": "]\\("}
_MD_SPECIAL = re.compile("|".join(re.escape(c) for c in _MD_ESCAPES))


_MD_ENTITIES = re.compile(r"&(amp|lt|gt);")
_MD_ENTITY_CHARS = {"amp": "&", "lt": "<", "gt": ">"}


def md_for_terminal(markdown: str) -> str:
    """Markdown written with :func:`md_text` as a terminal shows it: ``&lt;``, ``&gt;`` and ``&amp;`` read
    as the characters again (one pass, so a literal "&lt;" in the text stays "&lt;"); a terminal renders
    no HTML, and :func:`lmms_eval_plugins.console.emit` still escapes control characters."""
    return _MD_ENTITIES.sub(lambda m: _MD_ENTITY_CHARS[m.group(1)], markdown)


def md_text(text: Any) -> str:
    """Untrusted text as one line of Markdown (a table cell, a heading): no HTML, no link, no span escapes,
    no control characters."""
    flat = " ".join(escape_controls(text).splitlines())
    return _MD_SPECIAL.sub(lambda m: _MD_ESCAPES[m.group(0)], flat)


def md_code(text: Any) -> str:
    """Untrusted text as one inline code span: its fence is one backtick longer than any run inside it.

    Inside a code span Markdown reads no HTML; ``|`` is still escaped (GitHub tables split cells on it
    even there), line breaks become spaces, so the span stays in its cell, and controls are escaped.
    """
    flat = " ".join(escape_controls(text).splitlines()).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(flat)), default=0) + 1)
    if not flat.strip():
        return f"{fence} {fence}"  # "``" would be no span at all
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
