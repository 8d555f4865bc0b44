"""A small OpenAI chat-completions server on 127.0.0.1 for the openai-chat adapter tests.

It answers with a callable (in the tests, the tiny LLaVA) and can be slow, fail its first
requests, or fail after some, and it records what it saw (requests, the largest number
in flight at once, headers). :func:`chat_client` is the adapter that the tests point at
it, asked ``QUESTIONS`` about :func:`solid_images`.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Self

from PIL import Image

if TYPE_CHECKING:
    from vqarobust.models.base import VQAModel

QUESTIONS = [
    "what color is the shape?",
    "is there a red circle?",
    "how many dogs?",
    "does the image contain a triangle?",
]


def solid_images(n: int) -> list[Image.Image]:
    """``n`` 40x40 images of one colour each, red, green, blue and yellow in turn."""
    colours = ["red", "green", "blue", "yellow"]
    return [Image.new("RGB", (40, 40), colours[i % 4]) for i in range(n)]


def chat_client(base_url: str, **kw: object) -> VQAModel:
    """The openai-chat adapter ("served") on ``base_url``, 4 new tokens at most; ``kw``
    adds to or overrides its spec."""
    from vqarobust.models import load_model

    spec = {
        "family": "openai-chat",
        "base_url": base_url,
        "model": "tiny-llava",
        "max_new_tokens": 4,
        **kw,
    }
    return load_model(spec, name="served", device="cpu")


class _Backlogged(ThreadingHTTPServer):
    # The listen backlog is set before the socket listens: a class attribute. The
    # default 5 resets connections that a burst of 32 opens at once.
    request_queue_size = 256
    daemon_threads = True


def _serve(handle: Callable[[BaseHTTPRequestHandler], None]) -> ThreadingHTTPServer:
    """An HTTP/1.1 server on a free port of 127.0.0.1 whose POSTs go to ``handle``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, so a client can pool connections
        # Headers and body leave in two writes: with Nagle's algorithm on, the client's
        # delayed ACK holds the body back ~40 ms, a cost no real server has.
        disable_nagle_algorithm = True

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            handle(self)

    return _Backlogged(("127.0.0.1", 0), Handler)


class _LocalServer:
    """Serves ``handle`` on 127.0.0.1 at ``base_url`` inside ``with``."""

    def __init__(self, handle: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self._httpd = _serve(handle)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@dataclass(frozen=True)
class Behaviour:
    """What a :class:`ChatServer` says of itself: the replies' ``model`` and
    ``system_fingerprint`` (with token usage) when ``served_as`` is given; and
    ``script(n, question)``, which may replace the n-th reply with (status, payload), e.g.
    a filtered or cut-off one."""

    served_as: str | None = None
    fingerprint: str | None = None
    script: Callable[[int, str], tuple[int, dict] | None] | None = None


class ChatServer(_LocalServer):
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
        behaviour: Behaviour | None = None,
    ) -> None:
        behaviour = behaviour or Behaviour()
        self.served_as, self.fingerprint = behaviour.served_as, behaviour.fingerprint
        self.script = behaviour.script
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
        _LocalServer.__init__(self, self._handle)

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
        assert body["temperature"] == 0 and "seed" in body
        if isinstance(content, str):  # a text-only request: the adapter's identity probe
            return 200, self._payload({"message": {"role": "assistant", "content": "OK"}}, 1)
        url = next(c["image_url"]["url"] for c in content if c["type"] == "image_url")
        text = next(c["text"] for c in content if c["type"] == "text")
        scripted = self.script(n, text) if self.script else None
        if scripted is not None:
            return scripted[0], self._payload(scripted[1], 0)
        image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        with self._model_lock:  # one model; requests wait in parallel around it
            answer = self.answer(image.convert("RGB"), text)
        with self._lock:
            self.answered += 1
        choice = {"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
        return 200, self._payload(choice, len(answer.split()))

    def _payload(self, choice: dict, completion_tokens: int) -> dict:
        """A reply around ``choice`` (a payload of its own when it has no "message"),
        with the server's identity and a token count where it names itself."""
        payload = {"choices": [choice]} if "message" in choice else dict(choice)
        if self.served_as is not None:
            payload["model"] = self.served_as
            payload["system_fingerprint"] = self.fingerprint
            payload["usage"] = {"prompt_tokens": 100, "completion_tokens": completion_tokens}
        return payload


class CostServer(_LocalServer):
    """A chat-completions server on 127.0.0.1 that simulates an inference server's cost
    model instead of running one: ``slots`` requests compute at once (a batch on the GPU),
    each takes ``prefill_s`` for its image, or ``prefill_s * cached`` when that image is
    among the ``cache_images`` most recently computed (a prefix cache), plus
    ``decode_s``; with more than ``max_queue`` requests waiting or computing it answers
    429. It counts requests, 429s, cache hits and the largest number in flight."""

    def __init__(
        self,
        slots: int = 8,
        prefill_s: float = 0.04,
        decode_s: float = 0.01,
        cached: float = 0.1,
        cache_images: int = 4,
        max_queue: int = 16,
    ) -> None:
        self.prefill_s, self.decode_s, self.cached = prefill_s, decode_s, cached
        self.cache_images, self.max_queue = cache_images, max_queue
        self.requests = self.refused = self.hits = self.in_flight = self.max_in_flight = 0
        self._slots = threading.Semaphore(slots)
        self._lock = threading.Lock()
        self._recent: list[str] = []
        _LocalServer.__init__(self, self._handle)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
        content = body["messages"][0]["content"]
        image = next(c["image_url"]["url"] for c in content if c["type"] == "image_url")
        with self._lock:
            self.requests += 1
            refused = self.in_flight >= self.max_queue
            if refused:
                self.refused += 1
            else:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if refused:
            self._send(handler, 429, {"error": "overloaded"})
            return
        with self._slots:
            with self._lock:
                hit = image in self._recent
                self.hits += hit
                if hit:
                    self._recent.remove(image)
                self._recent = [*self._recent, image][-self.cache_images :]
            time.sleep(self.prefill_s * (self.cached if hit else 1.0) + self.decode_s)
        with self._lock:
            self.in_flight -= 1
        self._send(
            handler, 200, {"choices": [{"message": {"role": "assistant", "content": "Yes."}}]}
        )

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
