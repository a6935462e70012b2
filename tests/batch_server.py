"""A loopback OpenAI-compatible Batch API (``/v1/files`` + ``/v1/batches``) on top of the judge server.

Each batch runs when it is first polled: its lines are answered as :class:`JudgeServer` answers a chat
completion (the canned verdict, or ``behaviour``), and the output and error files are written. Status
moves ``validating`` -> ``in_progress`` -> ``finalizing`` -> the batch's fate, one step per poll, unless
``hold`` keeps it in progress (a test kills the client meanwhile). Fates (``fate(n)`` for the n-th
batch created, from 0): ``completed``; ``expired`` and ``cancelled`` (the first half of the lines
answered, the rest ``batch_expired``/``batch_cancelled`` in the error file); ``failed`` (validation:
no output at all). ``line_fault(custom_id, body)`` returns an error line's ``response`` or ``error`` for
one line (a refusal, a 400), or None. A file of more than ``max_requests`` lines fails validation.

Hostile behaviours (issue 36): ``output_edit(rows)`` rewrites the rows of each output file before it is
stored (relabel, duplicate, add unknown lines; a ``str`` row is written as it is, e.g. JSON nested 100,000
deep); ``retrieve_fault(batch_id, public)`` answers a poll instead, as (HTTP status, raw body) (a 404 for
another account's batch, wrong types, deep nesting); ``download(file_id, content)`` serves a file's content
as (chunks, seconds between bytes), without a Content-Length (an endless or trickled file); ``downloads``
counts the GETs of each file's content, ``download_times`` the (start, end) of each served stream.

Usage counts simulate a provider: prompt tokens are characters/4 of the messages; cached tokens are
the prefix shared with the first request of the same system message (characters/4, in 128-token
steps from ``min_cached_tokens``, as providers cache). Synchronous calls get the same counts;
``sync_calls`` counts them.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from judge_server import (
    JudgeServer,
    Reply,
    Request,
    canned_content,
    client_error,
    completion_body,
)

LineFault = Callable[[str, dict[str, Any]], "dict[str, Any] | None"]
OutputEdit = Callable[[list[dict[str, Any]]], "list[dict[str, Any] | str]"]
RetrieveFault = Callable[[str, dict[str, Any]], "tuple[int, bytes] | None"]
Download = Callable[[str, bytes], "tuple[Iterable[bytes], float] | None"]


def refused(message: str = "I cannot help with that request.") -> dict[str, Any]:
    """A line the provider refused (content policy): HTTP 400 in the error file."""
    return {"response": {"status_code": 400, "body": {"error": {"message": message, "type": "invalid_request_error"}}}}


class BatchServer(JudgeServer):
    def __init__(
        self,
        *args: Any,
        fate: Callable[[int], str] | None = None,
        line_fault: LineFault | None = None,
        max_requests: int = 50_000,
        min_cached_tokens: int = 1024,
        output_edit: OutputEdit | None = None,
        retrieve_fault: RetrieveFault | None = None,
        download: Download | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fate = fate or (lambda n: "completed")
        self.line_fault = line_fault
        self.output_edit = output_edit
        self.retrieve_fault = retrieve_fault
        self.download = download
        self.downloads: dict[str, int] = {}
        self.download_times: list[tuple[float, float]] = []
        self.max_requests = max_requests
        self.min_cached_tokens = min_cached_tokens
        self.hold = False
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.sync_calls = 0
        self.polls = 0
        self._prefixes: dict[str, str] = {}  # system message -> the first request's text (the cached prefix)
        self._batch_lock = threading.RLock()

    # -- hostile downloads: a streamed body without a length (replaces the judge server's GET handler) -----
    def start(self) -> BatchServer:
        super().start()
        assert self._httpd is not None
        plain, server = self._httpd.RequestHandlerClass, self

        class Handler(plain):  # type: ignore[misc, valid-type]
            def do_GET(self) -> None:
                served = server._download(self.path)
                if served is None:
                    plain.do_GET(self)
                    return
                chunks, trickle = served
                self.close_connection = True
                started = time.monotonic()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for chunk in chunks:
                        pieces = [chunk[i : i + 1] for i in range(len(chunk))] if trickle > 0 else [chunk]
                        for piece in pieces:
                            if trickle > 0 and server._stop.wait(trickle):
                                return
                            self.wfile.write(piece)
                            self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client hung up (its cap or deadline)
                    pass
                finally:
                    server.download_times.append((started, time.monotonic()))

        self._httpd.RequestHandlerClass = Handler
        return self

    def _download(self, path: str) -> tuple[Iterable[bytes], float] | None:
        parts = path.split("?")[0].rstrip("/").split("/")
        if not path.split("?")[0].rstrip("/").endswith("/content") or parts[-2] not in self.contents:
            return None
        with self._batch_lock:
            self.downloads[parts[-2]] = self.downloads.get(parts[-2], 0) + 1
        return self.download(parts[-2], self.contents[parts[-2]]) if self.download else None

    # -- usage -----------------------------------------------------------------------------------
    def usage(self, body: dict[str, Any], completion: str) -> tuple[int, int, int]:
        messages = body.get("messages") or []
        text = "".join(str(m.get("content", "")) for m in messages)
        system = str(messages[0].get("content", "")) if messages else ""
        with self._batch_lock:
            first = self._prefixes.setdefault(system, text)
        shared = 0
        for a, b in zip(first, text):
            if a != b:
                break
            shared += 1
        prompt, cached = (len(text) + 3) // 4, (shared // 4) // 128 * 128 if first is not text else 0
        cached = cached if cached >= self.min_cached_tokens else 0
        return prompt, max(1, (len(completion) + 3) // 4), min(cached, prompt)

    # -- synchronous calls ---------------------------------------------------------------------------
    def _handle(self, body: dict[str, Any], headers: dict[str, str], path: str) -> Reply | None:
        route = path.split("?")[0].rstrip("/")
        if route.endswith("/files"):
            return self._upload(body, headers)
        if route.endswith("/batches"):
            return self._create(body)
        if route.endswith("/cancel"):
            return self._cancel(route.split("/")[-2])
        with self._batch_lock:
            self.sync_calls += 1
        reply = super()._handle(body, headers, path)
        if reply is not None and reply.status == 200 and reply.raw is None and reply.usage == Reply().usage:
            reply.usage = self.usage(body, reply.content or "")
        return reply

    # -- the Batch API ---------------------------------------------------------------------------
    def _upload(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        ctype = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
        raw = str(body.get("_raw", "")).encode("utf-8")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {ctype}\r\n\r\n".encode() + raw
        )
        parts = {p.get_param("name", header="content-disposition"): p for p in message.iter_parts()}
        if "file" not in parts:
            return client_error(400)
        content = parts["file"].get_payload(decode=True) or b""
        with self._batch_lock:
            file_id = f"file-{len(self.files)}"
            self.contents[file_id] = content
            self.files[file_id] = {
                "id": file_id,
                "object": "file",
                "bytes": len(content),
                "created_at": int(time.time()),
                "filename": parts["file"].get_filename() or "batch.jsonl",
                "status": "processed",
                "purpose": (parts["purpose"].get_content().strip() if "purpose" in parts else "batch"),
            }
            return Reply(raw=json.dumps(self.files[file_id]))

    def _create(self, body: dict[str, Any]) -> Reply:
        file_id = str(body.get("input_file_id"))
        with self._batch_lock:
            if file_id not in self.contents:
                return client_error(404)
            n = len(self.batches)
            batch_id = f"batch_{n}"
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body.get("endpoint"),
                "errors": None,
                "input_file_id": file_id,
                "completion_window": body.get("completion_window", "24h"),
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": int(time.time()),
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "metadata": body.get("metadata"),
                "_fate": self.fate(n),
                "_step": 0,
            }
            return Reply(raw=json.dumps(self._public(batch_id)))

    def _cancel(self, batch_id: str) -> Reply:
        with self._batch_lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return client_error(404)
            if batch["status"] in ("validating", "in_progress", "finalizing"):
                batch["_fate"], batch["status"] = "cancelled", "cancelling"
            return Reply(raw=json.dumps(self._public(batch_id)))

    def _public(self, batch_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    def _get(self, path: str) -> tuple[int, bytes, str]:
        route = path.split("?")[0].rstrip("/")
        parts = route.split("/")
        if route.endswith("/content") and parts[-2] in self.contents:
            return 200, self.contents[parts[-2]], "application/octet-stream"
        if parts[-1] in self.batches:
            with self._batch_lock:
                self.polls += 1
                self._advance(parts[-1])
                public = self._public(parts[-1])
                fault = self.retrieve_fault(parts[-1], public) if self.retrieve_fault else None
                if fault is not None:
                    return fault[0], fault[1], "application/json"
                return 200, json.dumps(public).encode(), "application/json"
        if route.endswith("/batches"):
            with self._batch_lock:
                data = [self._public(b) for b in reversed(list(self.batches))]
            return 200, json.dumps({"object": "list", "data": data, "has_more": False}).encode(), "application/json"
        return super()._get(path)

    def _advance(self, batch_id: str) -> None:
        batch = self.batches[batch_id]
        if batch["status"] in ("completed", "failed", "expired", "cancelled"):
            return
        if batch["status"] == "validating":
            lines = [json.loads(x) for x in self.contents[batch["input_file_id"]].splitlines() if x.strip()]
            if len(lines) > self.max_requests or batch["_fate"] == "failed":
                batch.update(
                    status="failed",
                    errors={
                        "object": "list",
                        "data": [
                            {
                                "code": "too_many_requests" if len(lines) > self.max_requests else "invalid_file",
                                "message": f"the input file has {len(lines)} requests; the limit is {self.max_requests}",
                            }
                        ],
                    },
                )
                return
            batch["_lines"] = lines
            batch["request_counts"]["total"] = len(lines)
            batch["status"] = "in_progress"
            return
        if self.hold and batch["status"] == "in_progress":
            return
        if batch["status"] == "in_progress":
            batch["status"] = "finalizing"
            return
        self._finish(batch)

    def _finish(self, batch: dict[str, Any]) -> None:
        lines, fate = batch.pop("_lines"), batch["_fate"]
        answered = len(lines) if fate == "completed" else len(lines) // 2
        out, err = [], []
        for i, line in enumerate(lines):
            cid, body = line["custom_id"], line["body"]
            record: dict[str, Any] = {
                "id": f"batch_req_{batch['id']}_{i}",
                "custom_id": cid,
                "response": None,
                "error": None,
            }
            if i >= answered:
                code = "batch_expired" if fate == "expired" else "batch_cancelled"
                err.append({**record, "error": {"code": code, "message": f"not run: the batch was {fate}"}})
                continue
            fault = self.line_fault(cid, body) if self.line_fault else None
            if fault is not None:
                err.append({**record, **fault})
                continue
            reply = (
                self.behaviour(Request(n=i, attempt=0, body=body, headers={}, path="/v1/chat/completions"))
                if self.behaviour
                else None
            )
            content = reply.content if reply is not None and reply.content is not None else canned_content(body)
            completion = completion_body(content, str(body.get("model")), self.usage(body, content), i)
            out.append({**record, "response": {"status_code": 200, "request_id": f"req_{i}", "body": completion}})
        edited: list[Any] = self.output_edit(out) if self.output_edit else out
        for kind, rows in (("output_file_id", edited), ("error_file_id", err)):
            if rows:
                file_id = f"file-{len(self.files)}"
                data = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).encode()
                self.contents[file_id] = data
                self.files[file_id] = {
                    "id": file_id,
                    "object": "file",
                    "bytes": len(data),
                    "created_at": int(time.time()),
                    "filename": f"{kind}.jsonl",
                    "status": "processed",
                    "purpose": "batch_output",
                }
                batch[kind] = file_id
        batch["request_counts"].update(completed=len(out), failed=len(err))
        batch["status"] = {"cancelled": "cancelled", "expired": "expired"}.get(fate, "completed")
