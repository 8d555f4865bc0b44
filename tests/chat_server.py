"""A small OpenAI chat-completions server on 127.0.0.1 for the openai-chat adapter tests.

It answers with a callable (in the tests, the tiny LLaVA) and can be slow, fail its first
requests, or fail after some, and it records what it saw (requests, the largest number
in flight at once, headers).
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image


class ChatServer:
    """``with ChatServer(answer) as server:`` serves ``server.base_url``."""

    def __init__(
        self,
        answer: Callable[[Image.Image, str], str],
        delay_s: float = 0.0,
        fail_first: int = 0,
        fail_status: int = 503,
        fail_after: int | None = None,
        retry_after: Callable[[], str] | None = None,
        malformed_first: int = 0,
    ) -> None:
        self.answer, self.delay_s = answer, delay_s
        self.fail_first, self.fail_status, self.fail_after = fail_first, fail_status, fail_after
        # A Retry-After header for the failed replies (made when each is sent), and how
        # many first requests get a 200 reply whose body is no JSON.
        self.retry_after, self.malformed_first = retry_after, malformed_first
        self.times: list[float] = []  # arrival (time.monotonic()) of each request
        self.ports: set[int] = set()  # client ports seen: one per connection
        self.requests = 0
        self.answered = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, so a client can pool connections

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                server._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _reply(self, handler: BaseHTTPRequestHandler, status: int, payload: dict | bytes) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        if status != 200 and self.retry_after is not None:
            handler.send_header("Retry-After", self.retry_after())
        handler.end_headers()
        handler.wfile.write(data)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
        with self._lock:
            self.requests += 1
            n = self.requests
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.headers.append(dict(handler.headers))
            self.times.append(time.monotonic())
            self.ports.add(handler.client_address[1])
        try:
            status, payload = self._respond(handler.path, body, n)
        finally:
            # Counted out before the reply leaves, so a client's next request never
            # overlaps this one in the count.
            with self._lock:
                self.in_flight -= 1
        self._reply(handler, status, payload)

    def _respond(self, path: str, body: dict, n: int) -> tuple[int, dict | bytes]:
        if path != "/v1/chat/completions":
            return 404, {"error": f"no route {path}"}
        if n <= self.fail_first:
            return self.fail_status, {"error": "try again"}
        if n <= self.malformed_first:
            return 200, b"<html>upstream proxy hiccup</html>"
        if self.fail_after is not None and self.answered >= self.fail_after:
            return 400, {"error": "refused (test)"}
        time.sleep(self.delay_s)
        content = body["messages"][0]["content"]
        url = next(c["image_url"]["url"] for c in content if c["type"] == "image_url")
        text = next(c["text"] for c in content if c["type"] == "text")
        image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        assert body["temperature"] == 0 and "seed" in body
        with self._model_lock:  # one model; requests wait in parallel around it
            answer = self.answer(image.convert("RGB"), text)
        with self._lock:
            self.answered += 1
        return 200, {"choices": [{"message": {"role": "assistant", "content": answer}}]}
