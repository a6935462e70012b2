"""Reading a judge's chat-completion reply, which is untrusted: the text, and token counts only
where they are believable."""

from __future__ import annotations

from typing import Any

# More tokens than any one chat completion reports: a larger (or negative) usage count is not believed.
MAX_USAGE_TOKENS = 100_000_000


class MalformedResponse(Exception):
    """The body is not a chat completion with text in choices[0].message.content."""


def shorten(text: Any, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def usage_count(value: Any) -> int | None:
    """A token count from a reply's ``usage``: a whole number in [0, MAX_USAGE_TOKENS]; None for
    anything else (negative, absurd, fractional, not a number), which the caller counts as 0."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        count = value
    elif isinstance(value, float) and value.is_integer():
        count = int(value)
    else:
        return None
    return count if 0 <= count <= MAX_USAGE_TOKENS else None


def read_completion(response: Any) -> tuple[str, int, int, str]:
    """(reply text, tokens in, tokens out, a note naming unbelievable usage counts or "")."""
    if isinstance(response, (str, bytes)):
        raise MalformedResponse(f"body is not a chat completion: {shorten(response, 80)!r}")
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError):
        raise MalformedResponse("no choices[0].message.content in the body") from None
    if not isinstance(content, str):
        raise MalformedResponse("choices[0].message.content is not text")
    usage = getattr(response, "usage", None)
    counts, bad = [], []
    for name in ("prompt_tokens", "completion_tokens"):
        raw = getattr(usage, name, None) if usage is not None else None
        count = 0 if raw is None else usage_count(raw)
        if count is None:
            bad.append(f"{name}={shorten(repr(raw), 40)}")
        counts.append(count or 0)
    return content, counts[0], counts[1], ", ".join(bad)


def cached_tokens(response: Any) -> int:
    """``usage.prompt_tokens_details.cached_tokens`` (input tokens the provider's prefix cache served),
    0 when absent or not believable."""
    usage = response.get("usage") if isinstance(response, dict) else getattr(response, "usage", None)
    details = (
        usage.get("prompt_tokens_details") if isinstance(usage, dict) else getattr(usage, "prompt_tokens_details", None)
    )
    raw = details.get("cached_tokens") if isinstance(details, dict) else getattr(details, "cached_tokens", None)
    return usage_count(raw) or 0 if raw is not None else 0
