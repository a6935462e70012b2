"""Where a judge's traffic goes: the endpoint and judge model from the environment, URL checks,
the messages when none is configured, and the one-line announcement of each judge's endpoint.

The key never leaves an :class:`Endpoint` (its repr hides it); messages name only the host."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from lmms_eval_plugins.safe_text import is_credential_name

from .base import JudgeConfigError
from .cache import sanitise_endpoint

# ---- configuration variables (documented in docs/judges.md) ------------------------------------
ENV_API_KEY = "OPENAI_API_KEY"
ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_API_URL = "OPENAI_API_URL"  # lmms-eval's own variable; accepted as an alias
ENV_API_BASE = "OPENAI_API_BASE"  # lmms-eval's model classes' variable: never the judge's (see resolve_endpoint)
ENV_MODEL = "LMMS_EVAL_PLUGINS_JUDGE_MODEL"
ENV_JUDGE = "LMMS_EVAL_PLUGINS_JUDGE"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


# ---- endpoint ----------------------------------------------------------------------------------


def endpoint_host(url: str | None) -> str:
    """``scheme://host[:port]`` of ``url``: never credentials, path, query or fragment.

    What the judge announcement and error messages show.  A URL that does not parse gives
    ``<unparseable URL>`` (never the raw text, which may hold a key)."""
    try:
        parts = urlsplit(str(url or "").strip())
        host, port = parts.hostname, parts.port
    except ValueError:  # e.g. a non-numeric port
        return "<unparseable URL>"
    if not parts.scheme or not host:
        return "<unparseable URL>"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint.  The key is never shown by repr/str or written anywhere."""

    base_url: str
    api_key: str = field(repr=False)
    source: str = ""  # the variable the URL came from (ENV_API_KEY: the OpenAI default), "" if given directly

    def __post_init__(self) -> None:
        reject_url_credentials(self.base_url, self.source or "the judge endpoint", self.api_key)

    def __repr__(self) -> str:  # pragma: no cover - trivial
        return f"Endpoint(base_url={sanitise_endpoint(self.base_url)!r}, api_key=***, source={self.source!r})"

    __str__ = __repr__

    @property
    def display(self) -> str:
        return sanitise_endpoint(self.base_url)

    @property
    def host(self) -> str:
        """``scheme://host[:port]`` only (see :func:`endpoint_host`)."""
        return endpoint_host(self.base_url)

    @property
    def origin(self) -> str:
        """Where the URL came from, in words, for the judge announcement."""
        if self.source == ENV_API_KEY:
            return f"default: {ENV_API_KEY} set, no {ENV_BASE_URL}"
        return f"from {self.source}" if self.source else "given directly"


def _set(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or "").strip()


def credential_query_params(url: str, key: str | None = None) -> list[str]:
    """Names of the query parameters of ``url`` that look like credentials, or whose value is ``key``."""
    try:
        query = urlsplit(url).query
    except ValueError:
        query = url.partition("?")[2]
    found = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        # the one list of credential names (safe_text): the redactor hides what this refuses
        if is_credential_name(name) or (key and len(key) >= 4 and key in value):
            found.append(name)
    return found


def reject_url_credentials(url: str, source: str, key: str | None = None) -> None:
    """Refuse a URL that carries ``user:password@`` (the client would send it as Basic auth) or a
    credential in its query string (``?api_key=...``): the URL is shown and stored in places a key must
    never reach. The message names only the host and the parameter names."""
    try:
        parts = urlsplit(url)
        has_credentials = parts.username is not None or parts.password is not None
    except ValueError:
        has_credentials = "@" in url.split("/", 3)[2] if url.count("/") >= 2 else "@" in url
    if has_credentials:
        raise JudgeConfigError(
            f"{source} holds credentials (user:password@ before {endpoint_host(url)}); the judge never sends a URL's "
            f"credentials: put the key in {ENV_API_KEY} and give the URL without them"
        )
    params = credential_query_params(url, key)
    if params:
        raise JudgeConfigError(
            f"{source} holds a credential in its query string (parameter(s) {', '.join(sorted(set(params)))} of "
            f"{endpoint_host(url)}); the judge never sends a key in a URL: put the key in {ENV_API_KEY} and give the "
            "URL without it"
        )


def endpoint_from_env(env: Mapping[str, str] | None = None) -> Endpoint | None:
    """The configured endpoint, or None when neither a key nor a URL is set.

    ``OPENAI_BASE_URL`` (or lmms-eval's ``OPENAI_API_URL``, with a trailing ``/chat/completions``
    removed) selects the server; with only ``OPENAI_API_KEY`` set the server is api.openai.com.  A
    URL without a key (a local vLLM/SGLang server) gets the placeholder key ``EMPTY``.
    ``OPENAI_API_BASE`` is never read: :func:`resolve_endpoint` refuses it when it is the only URL set.
    """
    env = _env(env)
    key = _set(env, ENV_API_KEY)
    url, source = _set(env, ENV_BASE_URL), ENV_BASE_URL
    if not url:
        url, source = _set(env, ENV_API_URL), ENV_API_URL
        for suffix in ("/chat/completions", "/completions"):
            url = url.removesuffix(suffix)
    if not url and not key:
        return None
    if not url:
        url, source = DEFAULT_OPENAI_BASE_URL, ENV_API_KEY
    if endpoint_host(url) == "<unparseable URL>" or urlsplit(url).scheme not in ("http", "https"):
        raise JudgeConfigError(
            f"{source} is not an http:// or https:// URL with a host; give the judge server's /v1 URL, "
            "e.g. http://localhost:8000/v1"
        )
    return Endpoint(base_url=url.rstrip("/"), api_key=key or "EMPTY", source=source)


def _offline_name(judge_name: str) -> str:
    return judge_name if judge_name.endswith("_offline") else f"{judge_name}_offline"


def missing_endpoint_message(judge_name: str) -> str:
    offline = _offline_name(judge_name)
    return (
        f"The LLM judge {judge_name!r} needs an OpenAI-compatible endpoint and none is configured. "
        f"Either set {ENV_API_KEY} (OpenAI), or {ENV_BASE_URL} (or lmms-eval's {ENV_API_URL}) to the "
        f"server's /v1 URL, e.g. http://localhost:8000/v1 for vLLM or SGLang, with {ENV_API_KEY} if it "
        f"needs one; choose the judge model with {ENV_MODEL}. Or set {ENV_JUDGE}=offline to use the "
        f"deterministic offline judge {offline!r} (lower fidelity; scores are not comparable with the papers')."
    )


def api_base_only_message(judge_name: str, api_base: str) -> str:
    """Why a run with ``OPENAI_API_BASE`` but no judge URL stops (shows the host only, never the key)."""
    return (
        f"The LLM judge {judge_name!r} does not read {ENV_API_BASE} (set here, to {endpoint_host(api_base)}): "
        f"{ENV_API_BASE} is read by lmms-eval's model class (the model under test), not by the judge, and "
        f"neither {ENV_BASE_URL} nor lmms-eval's {ENV_API_URL} is set. Judging with the model under test "
        f"would be wrong, and falling back to the public OpenAI endpoint would be a surprise, so the run stops "
        f"here, before inference. Set {ENV_BASE_URL} to the judge's endpoint (it may be the same URL, e.g. "
        f"export {ENV_BASE_URL}=${ENV_API_BASE}; choose the judge model with {ENV_MODEL}), or set "
        f"{ENV_JUDGE}=offline to use the offline judge {_offline_name(judge_name)!r} (lower fidelity)."
    )


def resolve_endpoint(judge_name: str, env: Mapping[str, str] | None = None) -> Endpoint:
    """The judge's endpoint, or :class:`JudgeConfigError` (raised at task build, before inference):
    none configured, or ``OPENAI_API_BASE`` set without ``OPENAI_BASE_URL``/``OPENAI_API_URL``."""
    env = _env(env)
    api_base = _set(env, ENV_API_BASE)
    if api_base and not _set(env, ENV_BASE_URL) and not _set(env, ENV_API_URL):
        raise JudgeConfigError(api_base_only_message(judge_name, api_base))
    endpoint = endpoint_from_env(env)
    if endpoint is None:
        raise JudgeConfigError(missing_endpoint_message(judge_name))
    return endpoint


def resolve_model(default_model: str | None, env: Mapping[str, str] | None = None) -> str:
    model = (_env(env).get(ENV_MODEL) or "").strip() or (default_model or "").strip()
    if not model:
        raise JudgeConfigError(f"no judge model: set {ENV_MODEL} or give default_model in the task's JudgeFilter")
    return model


ANNOUNCE_PREFIX = "lmms-eval-plugins judge:"


def announcement(judge_name: str, version: str | None, model: str | None, endpoint: Endpoint | None) -> str:
    """The line that says where a judge's traffic goes, e.g.
    ``lmms-eval-plugins judge: semantic_match v1 -> model gpt-4o at http://127.0.0.1:8000 (from OPENAI_BASE_URL)``;
    ``... -> offline (no endpoint)`` for an offline judge.  Host only: no credentials, path or query."""
    who = f"{judge_name} v{version}" if version else judge_name
    if endpoint is None:
        return f"{ANNOUNCE_PREFIX} {who} -> offline (no endpoint)"
    return f"{ANNOUNCE_PREFIX} {who} -> model {model} at {endpoint.host} ({endpoint.origin})"
