"""A tiny OpenAI-compatible chat-completions server for the test-suite (and the Responses
API's ``POST …/responses``, for the OpenAI Agents SDK's default model).

It is not a mock of litellm: tests point litellm's ``openai/<model>`` provider at
``FakeLLMServer.url`` and litellm performs its real HTTP request against it.
Only the standard library is used so the server cannot drift with a dependency.

Replies are scripted FIFO with ``push_*``; when the script is empty the optional
``responder`` callable decides, and if there is none the server answers HTTP 500
with an ``unexpected request`` error, so a test notices a call it did not plan.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULT_KINDS = frozenset(
    {"429", "500", "503", "401", "400", "slow", "malformed_json", "empty", "context_window",
     # added for hardening: a reply dripped a byte every ``seconds``, a reset connection, a
     # 200 with no choices, a 200 of HTML, and a 20 MB reply
     "drip", "reset", "empty_choices", "html", "huge"}
)
HUGE_REPLY_CHARS = 20_000_000

# Wording is ours; the only thing that matters to clients is the code and the
# usual "maximum context length" phrasing that providers use.
_CONTEXT_WINDOW_MESSAGE = (
    "This model's maximum context length is 8192 tokens, but the request used 9100 "
    "tokens. Please shorten the conversation and try again."
)


@dataclass
class Reply:
    """One scripted answer. ``kind`` is "text", "tool_call" or a fault kind."""

    kind: str = "text"
    text: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    prompt_tokens: int = 10
    completion_tokens: int = 5
    seconds: float = 2.0  # only for the "slow" fault
    retry_after: float = 0.0  # only for the "429" fault (sent as the Retry-After header)


def text_reply(text: str | None, *, prompt_tokens: int = 10, completion_tokens: int = 5) -> Reply:
    return Reply("text", text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def tool_call_reply(
    name: str,
    arguments: dict[str, Any] | str,
    *,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
) -> Reply:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Reply(
        "tool_call",
        tool_calls=[(name, args)],
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


def fault_reply(kind: str, *, seconds: float = 2.0, retry_after: float = 0.0) -> Reply:
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(FAULT_KINDS)}")
    return Reply(kind, seconds=seconds, retry_after=retry_after)


Responder = Callable[[dict[str, Any]], "Reply | str"]


class FakeLLMServer:
    """OpenAI-style ``POST …/chat/completions`` on 127.0.0.1, in a daemon thread."""

    def __init__(self, responder: Responder | None = None, *, model: str = "test-model") -> None:
        self.responder = responder
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._counter = 0
        self._stopping = threading.Event()  # wakes "slow" handlers early on stop()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------
    def start(self) -> FakeLLMServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _QuietServer(("127.0.0.1", 0), _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """Base url for litellm's ``api_base`` (the openai client appends /chat/completions)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- script ----------------------------------------------------------
    def push(self, reply: Reply) -> None:
        with self._lock:
            self._script.append(reply)

    def push_text(self, text: str | None, *, prompt_tokens: int = 10, completion_tokens: int = 5) -> None:
        self.push(text_reply(text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens))

    def push_tool_call(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
    ) -> None:
        self.push(
            tool_call_reply(
                name, arguments, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
        )

    def push_json(self, obj: Any, *, prompt_tokens: int = 10, completion_tokens: int = 5) -> None:
        self.push_text(json.dumps(obj), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    def push_fault(self, kind: str, *, seconds: float = 2.0, retry_after: float = 0.0) -> None:
        """Script a failure; ``seconds`` is the "slow" delay, ``retry_after`` the 429 header."""
        self.push(fault_reply(kind, seconds=seconds, retry_after=retry_after))

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._script)

    def clear(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.request_headers.clear()

    # -- used by the handler ---------------------------------------------
    def _next_reply(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Reply | None]:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)
            self._counter += 1
            n = self._counter
            reply = self._script.popleft() if self._script else None
        if reply is None and self.responder is not None:
            made = self.responder(body)
            reply = text_reply(made) if isinstance(made, str) else made
        return n, reply

    def _completion_body(self, n: int, reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        finish_reason = "stop"
        if reply.kind == "empty":
            message["content"] = ""
        elif reply.kind == "tool_call":
            message["content"] = None
            message["tool_calls"] = [
                {
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }
                for i, (name, args) in enumerate(reply.tool_calls)
            ]
            finish_reason = "tool_calls"
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 1_700_000_000 + n,
            "model": request.get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            },
        }

    def _responses_body(self, n: int, reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
        """The Responses API's answer to the same reply: a message, or function calls."""
        if reply.kind == "tool_call":
            output: list[dict[str, Any]] = [
                {"type": "function_call", "id": f"fc_{n}_{i}", "call_id": f"call_{n}_{i}", "name": name,
                 "arguments": args, "status": "completed"}
                for i, (name, args) in enumerate(reply.tool_calls)
            ]
        else:
            text = "" if reply.kind == "empty" else reply.text or ""
            output = [{"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]}]
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 1_700_000_000 + n,
            "model": request.get("model") or self.model,
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": reply.prompt_tokens,
                "output_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }


class _QuietServer(ThreadingHTTPServer):
    """A client that gives up on a slow reply (a timeout test's CLI) resets its connection: that
    is what those tests provoke, not a fault, and the default handler's traceback on stderr
    would land in the output of the command under test, which runs in this process."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def _error_body(message: str, err_type: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": err_type, "param": None, "code": code}}


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive like a real API; needs Content-Length
        timeout = 10  # idle keep-alive connections must not pin threads forever

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # keep pytest output clean

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            self.responses_api = self.path.rstrip("/").endswith("/responses")
            if not (self.path.rstrip("/").endswith("/chat/completions") or self.responses_api):
                self._send_json(404, _error_body(f"no route for {self.path}", "not_found", None))
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send_json(400, _error_body("request body is not JSON", "invalid_request_error", None))
                return
            n, reply = server._next_reply(body, {k.lower(): v for k, v in self.headers.items()})
            if reply is None:
                self._send_json(
                    500,
                    _error_body(
                        "FakeLLMServer: unexpected request (script empty, no responder)",
                        "server_error",
                        "unexpected_request",
                    ),
                )
                return
            self._answer(n, reply, body)

        def do_GET(self) -> None:  # noqa: N802
            self._send_json(404, _error_body(f"no route for {self.path}", "not_found", None))

        def _answer(self, n: int, reply: Reply, request: dict[str, Any]) -> None:
            kind = reply.kind
            if kind == "429":
                self._send_json(
                    429,
                    _error_body("Too many requests, slow down.", "rate_limit_error", "rate_limit_exceeded"),
                    extra_headers={"Retry-After": f"{reply.retry_after:g}"},
                )
            elif kind in ("500", "503"):
                self._send_json(int(kind), _error_body("The fake server failed.", "server_error", None))
            elif kind == "401":
                self._send_json(401, _error_body("Invalid API key.", "invalid_request_error", "invalid_api_key"))
            elif kind == "400":
                self._send_json(400, _error_body("Bad request.", "invalid_request_error", None))
            elif kind == "context_window":
                self._send_json(
                    400,
                    _error_body(_CONTEXT_WINDOW_MESSAGE, "invalid_request_error", "context_length_exceeded"),
                )
            elif kind == "malformed_json":
                self._send_raw(200, b"{this is not json", "application/json")
            elif kind == "drip":
                body = json.dumps(server._completion_body(n, text_reply("dripped reply"), request)).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.flush()
                    for i in range(len(body)):
                        if server._stopping.wait(reply.seconds):
                            break
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True
            elif kind == "reset":
                import socket
                import struct

                # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
            elif kind == "empty_choices":
                body = server._completion_body(n, text_reply("x"), request)
                body["choices"] = []
                self._send_json(200, body)
            elif kind == "html":
                self._send_raw(200, b"<html><body>Welcome to nginx!</body></html>", "text/html")
            elif kind == "huge":
                self._send_json(200, server._completion_body(n, text_reply("x" * HUGE_REPLY_CHARS), request))
            elif kind == "slow":
                # Bounded: waits at most ``seconds``, or less if the server stops.
                server._stopping.wait(reply.seconds)
                self._send_json(200, server._completion_body(n, text_reply("slow reply"), request))
            elif self.responses_api:  # "text", "tool_call", "empty"
                self._send_json(200, server._responses_body(n, reply, request))
            else:
                self._send_json(200, server._completion_body(n, reply, request))

        def _send_json(
            self, status: int, obj: dict[str, Any], extra_headers: dict[str, str] | None = None
        ) -> None:
            self._send_raw(status, json.dumps(obj).encode(), "application/json", extra_headers)

        def _send_raw(
            self,
            status: int,
            data: bytes,
            content_type: str,
            extra_headers: dict[str, str] | None = None,
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for key, value in (extra_headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up (e.g. its timeout fired during a "slow" fault).
                self.close_connection = True

    return Handler
