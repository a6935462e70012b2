"""Text the plugin writes into reports: credentials redacted, Markdown that cannot carry markup.

Model names, task names, model args and model replies are untrusted text (SECURITY.md). One helper
redacts ``--model_args`` values whose key looks like a credential (lmms-eval itself redacts only
``api_key``, ``*_token`` and ``*_secret``); two helpers put untrusted text into Markdown: as plain text
(HTML and Markdown syntax escaped) or as a code span whose fence is longer than any backtick run in it.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

REDACTED = "***"
# Matched anywhere in an argument's name: apikey, api_key, hf_token, client_secret, password, auth, ...
SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|credential|cookie|session|signature|bearer",
                         re.IGNORECASE)
_BACKTICKS = re.compile(r"`+")
# Characters that make Markdown markup (or raw HTML) in a table cell or a line of text.
# "](" is what turns [text] into a link or an image (a tracking pixel): its parenthesis is escaped.
_MD_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "\\": "\\\\", "`": "\\`", "](": "]\\("}
_MD_SPECIAL = re.compile("|".join(re.escape(c) for c in _MD_ESCAPES))


def redact_url(value: str) -> str:
    """A URL with its userinfo password and its credential-like query values replaced by ``***``."""
    try:
        split = urllib.parse.urlsplit(value.strip())
    except ValueError:
        return value
    if not split.scheme or not split.netloc:
        return value
    netloc = split.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = "&".join(f"{k}={REDACTED}" if SECRET_NAME.search(urllib.parse.unquote(k)) else f"{k}{sep}{v}"
                     for k, sep, v in (p.partition("=") for p in split.query.split("&")) if k or v) \
        if split.query else ""
    return urllib.parse.urlunsplit((split.scheme, netloc, split.path, query, split.fragment))


def redact_arg(name: str, value: Any) -> str:
    """One model arg's value as it may be shown: ``***`` for a credential-like name; URLs lose their secrets."""
    if SECRET_NAME.search(str(name)):
        return REDACTED
    return redact_url(str(value))


def redact_model_args(model_args: str | Mapping[str, Any] | None,
                      split: Callable[[str], list[str]] | None = None) -> str:
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
        out.append(f"{name}={redact_arg(name.strip(), value)}" if sep else arg)
    return ",".join(out)


def md_text(text: Any) -> str:
    """Untrusted text as one line of Markdown (a table cell, a heading): no HTML, no link, no span escapes."""
    flat = " ".join(str(text).splitlines())
    return _MD_SPECIAL.sub(lambda m: _MD_ESCAPES[m.group(0)], flat)


def md_code(text: Any) -> str:
    """Untrusted text as one inline code span: its fence is one backtick longer than any run inside it.

    Inside a code span Markdown reads no HTML; ``|`` is still escaped (GitHub tables split cells on it
    even there) and line breaks become spaces, so the span stays in its cell.
    """
    flat = " ".join(str(text).splitlines()).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(flat)), default=0) + 1)
    if not flat.strip():
        return f"{fence} {fence}"  # "``" would be no span at all
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
