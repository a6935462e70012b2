"""Issue 36: one bounded HTTP reader. No shipped module but ``lmms_eval_plugins/bounded_http.py`` builds
an HTTP client or reads an HTTP body: every exchange (judge, batch, download, doctor) goes through it,
so each has a size cap, a total deadline and no redirect followed for API calls.

Every shipped Python file (``lmms_eval_plugins/``, ``judges/``, ``task_yamls/``) is parsed with ``ast``
(nothing is imported). Refused outside the reader: importing an HTTP client library (``urllib.request``,
``http.client``, ``httpx``/``httpx2``, ``httpcore``, ``requests``, ``aiohttp``, ``urllib3``, ``pycurl``) and
constructing an ``openai`` client (``openai.OpenAI(...)``, ``AsyncOpenAI``, the Azure ones, or the names
imported from ``openai``). Use ``bounded_http.openai_client`` / ``bounded_http.fetch`` instead.

:data:`ALLOWED` lists the exceptions, each with its reason; an entry no longer needed fails too.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHIPPED = ("lmms_eval_plugins", "judges", "task_yamls")
READER = "lmms_eval_plugins/bounded_http.py"
CLIENT_MODULES = (
    "urllib.request",
    "http.client",
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "requests",
    "aiohttp",
    "urllib3",
    "pycurl",
)
OPENAI_CLIENTS = ("OpenAI", "AsyncOpenAI", "AzureOpenAI", "AsyncAzureOpenAI")
NOT_CLIENTS = frozenset({"urllib.request.pathname2url", "urllib.request.url2pathname"})  # path helpers, no network

# (file, what) -> why it may stay. Keep this short: each entry is an exchange the reader does not bound.
ALLOWED: dict[tuple[str, str], str] = {
    (
        "lmms_eval_plugins/recording_proxy.py",
        "import http.client",
    ): "check-model's loopback reverse proxy forwards any method, headers and body unchanged; its upstream read is "
    "capped (MAX_BODY, read(max_body + 1)), follows no redirect (_NoRedirect) and has a per-read timeout. "
    "To go: forward through bounded_http.http_client(...).request(...)",
    ("lmms_eval_plugins/recording_proxy.py", "import urllib.request"): "the same proxy (see above)",
}


def _module_of(node: ast.ImportFrom) -> str:
    return "." * node.level + (node.module or "")


def _is_client_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in CLIENT_MODULES)


def findings(path: Path) -> list[tuple[int, str]]:
    """(line, what) for each HTTP client import or openai client construction in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    openai_names: set[str] = set()  # names bound by ``from openai import OpenAI [as X]``
    openai_modules = {"openai"}  # names bound to the openai module (``import openai as oa``)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_client_module(alias.name):
                    found.append((node.lineno, f"import {alias.name}"))
                if alias.name == "openai":
                    openai_modules.add(alias.asname or "openai")
        elif isinstance(node, ast.ImportFrom):
            module = _module_of(node)
            for alias in node.names:
                full = f"{module}.{alias.name}"
                if full in NOT_CLIENTS:
                    continue
                if _is_client_module(module) or _is_client_module(full):
                    found.append((node.lineno, f"import {full if _is_client_module(full) else module}"))
                if module == "openai" and alias.name in OPENAI_CLIENTS:
                    openai_names.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in OPENAI_CLIENTS
            and isinstance(func.value, ast.Name)
            and func.value.id in openai_modules
        ):
            found.append((node.lineno, f"{func.value.id}.{func.attr}(...)"))
        elif isinstance(func, ast.Name) and func.id in openai_names:
            found.append((node.lineno, f"{func.id}(...)"))
    return sorted(set(found))


def shipped_files() -> list[Path]:
    return sorted(p for folder in SHIPPED for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts)


def test_the_scan_sees_every_kind_of_client(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import urllib.request\nfrom http import client\nimport httpx2 as h\nfrom requests import get\n"
        "import openai as oa\nfrom openai import AsyncOpenAI as A\n"
        "def f():\n    import aiohttp\n    oa.OpenAI(api_key='k')\n    A()\n    openai.AzureOpenAI()\n"
        "import urllib.parse\nfrom http import HTTPStatus\nimport openai\nfrom urllib.request import pathname2url\n"
    )
    assert [what for _, what in findings(sample)] == [
        "import urllib.request",
        "import http.client",
        "import httpx2",
        "import requests.get",
        "import aiohttp",
        "oa.OpenAI(...)",
        "A(...)",
        "openai.AzureOpenAI(...)",
    ]


def test_the_reader_is_where_the_clients_are_built():
    found = findings(REPO / READER)
    assert any(what.startswith("import httpx") for _, what in found) or "http_library" in (REPO / READER).read_text()
    files = {p.relative_to(REPO).as_posix() for p in shipped_files()}
    assert {READER, "judges/runtime.py", "lmms_eval_plugins/doctor.py", "lmms_eval_plugins/data.py"} <= files


def test_no_http_client_is_built_outside_the_bounded_reader():
    seen: dict[tuple[str, str], list[int]] = {}
    for path in shipped_files():
        rel = path.relative_to(REPO).as_posix()
        if rel == READER:
            continue
        for line, what in findings(path):
            seen.setdefault((rel, what), []).append(line)
    unexpected = [
        f"{rel}:{lines[0]}: {what}" for (rel, what), lines in sorted(seen.items()) if (rel, what) not in ALLOWED
    ]
    assert not unexpected, (
        "HTTP clients outside lmms_eval_plugins/bounded_http.py (use bounded_http.openai_client or "
        "bounded_http.fetch):\n" + "\n".join(unexpected)
    )
    stale = [f"{rel}: {what}" for rel, what in ALLOWED if (rel, what) not in seen]
    assert not stale, "allow-list entries no longer needed (remove them):\n" + "\n".join(stale)
