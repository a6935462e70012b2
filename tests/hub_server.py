"""A loopback stand-in for the Hugging Face hub (and for a plain image host), for offline tests.

It speaks the part of the hub's HTTP API that ``huggingface_hub``'s ``hf_hub_download`` and
``snapshot_download`` use for ``repo_type="dataset"`` (point ``HF_ENDPOINT`` at :attr:`FakeHub.endpoint`):

- ``GET /api/datasets/<repo>[/revision/<rev>]``: repository info (``sha``, ``siblings``);
- ``GET /api/datasets/<repo>/tree/<rev>[/<path>]?recursive=...``: the file listing;
- ``HEAD|GET /datasets/<repo>/resolve/<rev>/<path>``: a file. Small text files are answered directly
  (``ETag`` = git blob sha1); media and large files ("LFS") get a 302 to a second loopback server
  standing for the CDN, with ``X-Linked-Etag`` (sha256) and ``X-Linked-Size``, as the hub does. Every
  answer carries ``X-Repo-Commit``; errors carry the hub's ``X-Error-Code`` (``RepoNotFound``,
  ``RevisionNotFound``, ``EntryNotFound``, ``GatedRepo``), from which ``huggingface_hub`` picks its
  exception class. ``Range: bytes=N-`` is honoured (206), so an interrupted download can resume.

Any other path is a plain file added with :meth:`FakeHub.add_url` (ErrorRadar's image URLs).
Faults (:class:`Fault`) make a repository file or a URL slow, fail with a status a given number of
times, drop the connection mid-file, trickle the file a byte at a time, or send bytes without end. Both servers bind 127.0.0.1 only; nothing leaves the machine.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# Served through the CDN redirect, as git-LFS files are on the hub (an assumption about each repository's
# .gitattributes; the hub's default one tracks these media types).
LFS_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".mp4", ".mkv", ".webm", ".avi", ".mov", ".zip", ".tar")
LFS_MIN_SIZE = 10 * 1024 * 1024


@dataclass
class Fault:
    """What goes wrong for a file: applied to the next ``times`` matching requests (``None``: all)."""

    status: int | None = None  # answer with this HTTP status instead of the file
    error_code: str | None = None  # the hub's X-Error-Code header for that status
    delay: float = 0.0  # seconds before answering (the client's read timeout fires first)
    drop_after: int | None = None  # GET only: send the headers and this many body bytes, then hang up
    trickle: float | None = None  # GET only: send the body one byte per this many seconds (each read is quick)
    endless: bool = False  # GET only: no Content-Length, then bytes until the client hangs up
    times: int | None = 1
    methods: tuple[str, ...] = ("GET", "HEAD")


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    status: int = 0


@dataclass
class Repo:
    files: dict[str, bytes]
    sha: str
    gated_token: str | None = None  # gated: 401 without a token, 403 with another one, served with this one
    lfs: set[str] = field(default_factory=set)


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """``with FakeHub() as hub:``; add repositories and URLs, then point clients at :attr:`endpoint`."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.urls: dict[str, bytes] = {}
        self.faults: dict[tuple[str, ...], Fault] = {}
        self.requests: list[Request] = []
        self._blobs: dict[str, tuple[str, str]] = {}  # sha256 -> (repo id, path)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._servers: list[ThreadingHTTPServer] = []

    # --------------------------------------------------------------------------------------- content

    def add_dataset(self, repo_id: str, files: Mapping[str, bytes]) -> str:
        """A dataset repository at revision ``main``; returns its commit sha."""
        digest = hashlib.sha1()
        for path in sorted(files):
            digest.update(f"{path}\0{git_blob_sha1(files[path])}\n".encode())
        repo = Repo(dict(files), digest.hexdigest())
        for path, data in files.items():
            if path.lower().endswith(LFS_SUFFIXES) or len(data) >= LFS_MIN_SIZE:
                repo.lfs.add(path)
                self._blobs[hashlib.sha256(data).hexdigest()] = (repo_id, path)
        self.repos[repo_id] = repo
        return repo.sha

    def add_dataset_folder(self, repo_id: str, folder: Path, extra: Mapping[str, bytes] | None = None) -> str:
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        return self.add_dataset(repo_id, {**files, **(extra or {})})

    def gate(self, repo_id: str, token: str) -> None:
        """Gate a repository: only ``Authorization: Bearer <token>`` (terms accepted) gets its files."""
        self.repos[repo_id].gated_token = token

    def add_url(self, path: str, data: bytes) -> str:
        self.urls[path] = data
        return self.url(path)

    def fault_file(self, repo_id: str, path: str, fault: Fault) -> None:
        self.faults[("file", repo_id, path)] = fault

    def fault_url(self, path: str, fault: Fault) -> None:
        self.faults[("url", path)] = fault

    def seen(self, method: str | None = None, contains: str = "") -> list[Request]:
        with self._lock:
            return [r for r in self.requests if (method is None or r.method == method) and contains in r.path]

    # ---------------------------------------------------------------------------------------- server

    def start(self) -> FakeHub:
        for _ in range(2):  # the hub, and the CDN its LFS redirects point to (another origin, as on the hub)
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
            self._servers.append(server)
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes delayed answers
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def __enter__(self) -> FakeHub:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._servers[0].server_address[1]}"

    @property
    def cdn(self) -> str:
        return f"http://127.0.0.1:{self._servers[1].server_address[1]}"

    def url(self, path: str) -> str:
        return self.endpoint + path

    def _take_fault(self, key: tuple[str, ...], method: str, body: bool) -> Fault | None:
        """The fault for this request, if any (a hang-up needs a request that sends the file's bytes)."""
        with self._lock:
            fault = self.faults.get(key)
            if fault is None or method not in fault.methods:
                return None
            if (fault.drop_after is not None or fault.trickle is not None or fault.endless) and (
                method != "GET" or not body
            ):
                return None
            if fault.times is not None:
                if fault.times <= 0:
                    return None
                fault.times -= 1
            return fault


_INFO = re.compile(r"^/api/datasets/([^/]+/[^/]+)(?:/revision/([^/]+))?$")
_TREE = re.compile(r"^/api/datasets/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?$")
_RESOLVE = re.compile(r"^/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_CDN = re.compile(r"^/cdn/([0-9a-f]{64})$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Answer(Exception):
    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None):
        self.status, self.message, self.headers = status, message, dict(headers or {})


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # quiet
            pass

        def do_HEAD(self):
            self._handle("HEAD")

        def do_GET(self):
            self._handle("GET")

        def _handle(self, method: str) -> None:
            split = urllib.parse.urlsplit(self.path)
            path = urllib.parse.unquote(split.path)
            record = Request(method, path, {k.lower(): v for k, v in self.headers.items()})
            with hub._lock:
                hub.requests.append(record)
            try:
                self._route(method, path, urllib.parse.parse_qs(split.query), record)
            except _Answer as answer:
                record.status = answer.status
                body = json.dumps({"error": answer.message}).encode()
                self._send(
                    answer.status,
                    {"Content-Type": "application/json", "X-Error-Message": answer.message, **answer.headers},
                    body,
                    method,
                )
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                self.close_connection = True

        # ------------------------------------------------------------------------------- routing

        def _route(self, method: str, path: str, query: dict[str, list[str]], record: Request) -> None:
            if (match := _INFO.match(path)) and method == "GET":
                repo = self._repo(match.group(1), match.group(2) or "main")
                return self._json(
                    record,
                    {
                        "id": match.group(1),
                        "sha": repo.sha,
                        "private": False,
                        "gated": "manual" if repo.gated_token else False,
                        "disabled": False,
                        "siblings": [{"rfilename": p} for p in sorted(repo.files)],
                    },
                )
            if (match := _TREE.match(path)) and method == "GET":
                repo = self._repo(match.group(1), match.group(2))
                recursive = query.get("recursive", ["false"])[0].lower() in ("true", "1")
                return self._json(record, self._tree(repo, match.group(3) or "", recursive))
            if match := _RESOLVE.match(path):
                return self._resolve(method, record, match.group(1), match.group(2), match.group(3))
            if match := _CDN.match(path):
                if match.group(1) not in hub._blobs:
                    raise _Answer(404, "no such blob")
                repo_id, name = hub._blobs[match.group(1)]
                fault = self._fault(("file", repo_id, name), method, record)
                data = hub.repos[repo_id].files[name]
                return self._file(method, record, data, {"ETag": f'"{match.group(1)}"'}, fault)
            if path in hub.urls:
                fault = self._fault(("url", path), method, record)
                return self._file(method, record, hub.urls[path], {"Content-Type": _content_type(path)}, fault)
            raise _Answer(404, f"{path} not found")

        def _repo(self, repo_id: str, revision: str) -> Repo:
            repo = hub.repos.get(repo_id)
            if repo is None:
                raise _Answer(404, "Repository not found", {"X-Error-Code": "RepoNotFound"})
            if revision not in ("main", repo.sha):
                raise _Answer(404, f"Invalid rev id: {revision}", {"X-Error-Code": "RevisionNotFound"})
            return repo

        def _tree(self, repo: Repo, under: str, recursive: bool) -> list[dict]:
            prefix = under.strip("/") + "/" if under.strip("/") else ""
            entries: dict[str, dict] = {}
            for name, data in sorted(repo.files.items()):
                if not name.startswith(prefix):
                    continue
                parts = name[len(prefix) :].split("/")
                for depth in range(1, len(parts)):  # the folders on the way
                    folder = prefix + "/".join(parts[:depth])
                    if recursive or depth == 1:
                        entries.setdefault(
                            folder,
                            {"type": "directory", "oid": git_blob_sha1(folder.encode()), "size": 0, "path": folder},
                        )
                if not recursive and len(parts) > 1:
                    continue
                entry = {"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": name}
                if name in repo.lfs:
                    entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                entries[name] = entry
            return list(entries.values())

        def _resolve(self, method: str, record: Request, repo_id: str, revision: str, name: str) -> None:
            repo = self._repo(repo_id, revision)
            commit = {"X-Repo-Commit": repo.sha}
            fault = self._fault(("file", repo_id, name), method, record, commit, body=name not in repo.lfs)
            if repo.gated_token is not None:
                auth = self.headers.get("Authorization")
                if auth != f"Bearer {repo.gated_token}":
                    status = 403 if auth else 401
                    raise _Answer(
                        status,
                        f"Access to dataset {repo_id} is restricted. You must have access to it "
                        "and be authenticated to access it. Please log in.",
                        {"X-Error-Code": "GatedRepo", **commit},
                    )
            if name not in repo.files:
                raise _Answer(404, "Entry not found", {"X-Error-Code": "EntryNotFound", **commit})
            data = repo.files[name]
            if name in repo.lfs:
                sha256 = hashlib.sha256(data).hexdigest()
                record.status = 302
                self._send(
                    302,
                    {
                        **commit,
                        "Location": f"{hub.cdn}/cdn/{sha256}",
                        "ETag": f'"{git_blob_sha1(data)}"',
                        "X-Linked-Etag": f'"{sha256}"',
                        "X-Linked-Size": str(len(data)),
                    },
                    b"",
                    method,
                )
                return
            self._file(method, record, data, {**commit, "ETag": f'"{git_blob_sha1(data)}"'}, fault)

        def _fault(
            self,
            key: tuple[str, ...],
            method: str,
            record: Request,
            headers: Mapping[str, str] | None = None,
            body: bool = True,
        ) -> Fault | None:
            fault = hub._take_fault(key, method, body)
            if fault is None:
                return None
            if fault.delay:
                hub._stopping.wait(fault.delay)
            if fault.status is not None:
                extra = {"X-Error-Code": fault.error_code} if fault.error_code else {}
                raise _Answer(fault.status, f"injected HTTP {fault.status}", {**(headers or {}), **extra})
            return fault

        # ------------------------------------------------------------------------------ answering

        def _json(self, record: Request, payload) -> None:
            record.status = 200
            self._send(200, {"Content-Type": "application/json"}, json.dumps(payload).encode(), "GET")

        def _file(
            self, method: str, record: Request, data: bytes, headers: dict[str, str], fault: Fault | None
        ) -> None:
            status, start, body = 200, 0, data
            wanted = _RANGE.match(self.headers.get("Range", "").strip())
            if wanted:
                start = int(wanted.group(1))
                end = int(wanted.group(2)) if wanted.group(2) else len(data) - 1
                if start >= len(data):
                    raise _Answer(416, "range not satisfiable", {"Content-Range": f"bytes */{len(data)}"})
                status, body = 206, data[start : end + 1]
                headers = {**headers, "Content-Range": f"bytes {start}-{start + len(body) - 1}/{len(data)}"}
            record.status = status
            headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream", **headers}
            if fault is not None and fault.drop_after is not None and method == "GET":
                self._send(status, headers, body, method, cut=fault.drop_after)
                return
            if fault is not None and (fault.trickle is not None or fault.endless) and method == "GET":
                self._stream(status, headers, body, fault)
                return
            self._send(status, headers, body, method)

        def _stream(self, status: int, headers: Mapping[str, str], body: bytes, fault: Fault) -> None:
            """A trickled body (a byte at a time) or an endless one (the file's bytes over and over, no length)."""
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            if not fault.endless:
                self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            piece = body or b"\0"
            try:
                if fault.endless:
                    while not hub._stopping.is_set():
                        self.wfile.write(piece * max(1, 65536 // len(piece)))
                        self.wfile.flush()
                else:
                    for i in range(len(body)):
                        if hub._stopping.wait(fault.trickle or 0):
                            return
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, OSError):  # the client gave up: the test's point
                return

        def _send(
            self, status: int, headers: Mapping[str, str], body: bytes, method: str, cut: int | None = None
        ) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            if cut is not None:
                self.send_header("Connection", "close")
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(body if cut is None else body[:cut])
            self.wfile.flush()
            if cut is not None:  # hang up mid-file: the client sees fewer bytes than Content-Length
                self.close_connection = True

    return Handler


def _content_type(path: str) -> str:
    suffix = Path(path).suffix.lower()
    return {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp"}.get(
        suffix, "application/octet-stream"
    )
