"""Adapter for models served behind the OpenAI chat-completions protocol (vLLM, TGI,
SGLang, a hosted API): family ``openai-chat``.

Each question is one request: the image as a base64 PNG data URL and the same short-answer
prompt as the in-process chat models, decoded deterministically (temperature 0, and a
seed, which servers that support it honour). Requests go through one pooled ``httpx``
client (keep-alive connections, ``max_concurrency`` in flight); 408/409/425/429/5xx
replies, timeouts, refused or dropped connections and a 200 reply whose body is no
chat-completions JSON are retried by ``tenacity`` with full-jitter exponential backoff
(a wait drawn uniformly from [0, 0.5 s x 2^attempt], capped at 30 s, so threads that
failed together do not retry together), or after the server's ``Retry-After`` (seconds
or an HTTP date) plus a jitter, up to ``max_retries`` times; then the job fails with
:class:`ServerError` naming the URL and the last problem. Any failure that ends a request
stops the batch: requests not yet sent are not sent, waits are cut short. The API key is
read from the environment variable ``api_key_env`` names; it never appears in the config,
the params or the logs. Resuming after a kill is the inference loop's.
"""

from __future__ import annotations

import base64
import datetime as dt
import email.utils
import io
import json
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import tenacity
from PIL import Image

from vqarobust.models import DEFAULT_BATCH_SIZE
from vqarobust.models.base import GeneratesReplies
from vqarobust.models.chat import DEFAULT_PROMPT
from vqarobust.models.concurrency import OVERLOAD_STATUS, ConcurrencyLimit, Outcome

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
BACKOFF_S = 0.5  # the first retry waits up to this, doubling each time
MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 120.0  # a Retry-After longer than this is cut to it


class ServerError(RuntimeError):
    """The server refused or failed a request beyond the retries."""


class _Retryable(Exception):
    """A failed attempt worth repeating; ``retry_after`` is the server's wish, if any;
    ``overload`` whether it says the server has too much to do (429, 503, a timeout)."""

    def __init__(
        self, problem: str, retry_after: float | None = None, overload: bool = False
    ) -> None:
        super().__init__(problem)
        self.problem, self.retry_after, self.overload = problem, retry_after, overload


class _Stopped(Exception):
    """The batch was stopped by another request's failure."""


def retry_after_seconds(value: str | None, now: dt.datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date
    (RFC 9110); None when absent or unreadable, 0 for a date in the past."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # HTTP dates are GMT
        when = when.replace(tzinfo=dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    return max(0.0, (when - now).total_seconds())


@dataclass(frozen=True)
class Transport:
    """How requests reach the server: the environment variable holding the API key
    (``api_key_env``; None sends none), concurrent requests (``max_concurrency``: the
    number, or with ``adaptive_concurrency`` the ceiling of a limit that adapts to the
    server, :mod:`vqarobust.models.concurrency`), the timeout of one request and the
    retries of a failed one (backoff with jitter, ``Retry-After`` honoured)."""

    api_key_env: str | None = None
    max_concurrency: int = 8
    timeout_s: float = 60.0
    max_retries: int = 3
    adaptive_concurrency: bool = True


class OpenAIChatVQA(GeneratesReplies):
    """A VQA model behind ``{base_url}/chat/completions``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        prompt: str = DEFAULT_PROMPT,
        max_new_tokens: int = 10,
        seed: int = 0,
        batch_size: int = DEFAULT_BATCH_SIZE,
        name: str = "model",
        device: str = "cpu",
        **transport: Any,
    ) -> None:
        """``transport``: a :class:`Transport`'s fields (API key variable, concurrency,
        timeout, retries). ``device`` is the job's and unused: the server holds the model."""
        super().__init__(batch_size=batch_size)
        link = Transport(**transport)
        if "{question}" not in prompt:
            raise ValueError(f"model {name!r}: prompt must contain '{{question}}', got {prompt!r}")
        if link.max_concurrency < 1 or link.max_retries < 0 or link.timeout_s <= 0:
            raise ValueError(
                f"model {name!r}: need max_concurrency >= 1, max_retries >= 0, timeout_s > 0"
            )
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.prompt, self.name = model, prompt, name
        self.max_concurrency, self.timeout_s, self.max_retries = (
            link.max_concurrency, link.timeout_s, link.max_retries,
        )  # fmt: skip
        max_concurrency, timeout_s = link.max_concurrency, link.timeout_s
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self._headers = {"Content-Type": "application/json"}
        if link.api_key_env is not None:
            key = os.environ.get(link.api_key_env)
            if not key:
                raise ValueError(
                    f"model {name!r}: the environment variable {link.api_key_env} "
                    "(api_key_env) is not set"
                )
            self._headers["Authorization"] = f"Bearer {key}"
        self._lock = threading.Lock()
        self.limit = ConcurrencyLimit(max_concurrency, adaptive=link.adaptive_concurrency)
        self.requests_sent = 0
        self._random = random.Random(f"{name}:{seed}")  # jitter only: never an answer
        self._client = httpx.Client(
            headers=self._headers,
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(
                max_connections=max_concurrency, max_keepalive_connections=max_concurrency
            ),  # fmt: skip
        )

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def request_order(self, images: Sequence[Any], questions: Sequence[str]) -> np.ndarray:
        """Requests about one image together, images in their first appearance's order
        (the inference loop passes a chunk in image order): a server with a prefix cache
        then computes each image's tokens once for all of its questions."""
        first: dict[int, int] = {}
        for i, im in enumerate(images):
            first.setdefault(id(im), i)
        return np.argsort([first[id(im)] for im in images], kind="stable")

    def reply(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """The server's replies for one batch, ``max_concurrency`` requests at a time; the first
        request that fails for good stops the rest of the batch."""
        urls: dict[int, str] = {}
        for im in images:  # each distinct image object encoded once
            if id(im) not in urls:
                urls[id(im)] = _data_url(im)
        bodies = [self._body(urls[id(im)], q) for im, q in zip(images, questions, strict=True)]
        stop = threading.Event()

        def one(body: bytes) -> str:
            try:
                return self._post(body, stop)
            except BaseException:
                stop.set()
                raise

        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            futures: list[Future[str]] = [pool.submit(one, b) for b in bodies]
            wait(futures, return_when=FIRST_EXCEPTION)
            for f in futures:
                f.cancel()  # those not started yet are never sent
        failed = [f.exception() for f in futures if not f.cancelled() and f.exception()]
        fatal = [e for e in failed if not isinstance(e, _Stopped)]
        if fatal or failed:
            raise (fatal or failed)[0]
        return [f.result() for f in futures]

    def _body(self, image_url: str, question: str) -> bytes:
        content = [
            {"type": "image_url", "image_url": {"url": image_url}},
            {"type": "text", "text": self.prompt.format(question=question)},
        ]
        return json.dumps(
            {
                "model": self.model,
                "messages": [{"role": "user", "content": content}],
                "temperature": 0,
                "max_tokens": self.max_new_tokens,
                "seed": self.seed,
            }
        ).encode("utf-8")

    def _wait_s(self, state: tenacity.RetryCallState) -> float:
        """Full jitter, or the server's Retry-After plus a jitter of up to one backoff."""
        with self._lock:
            jitter = self._random.uniform(
                0.0, min(BACKOFF_S * 2 ** (state.attempt_number - 1), MAX_BACKOFF_S)
            )
        exc = state.outcome.exception() if state.outcome else None
        after = getattr(exc, "retry_after", None)
        if after is not None:
            return min(after, MAX_RETRY_AFTER_S) + jitter
        return jitter

    def _post(self, body: bytes, stop: threading.Event) -> str:
        """One request with retries; the reply's text."""

        def before_sleep(state: tenacity.RetryCallState) -> None:
            problem = state.outcome.exception().problem  # type: ignore[union-attr]
            log.warning("%s: %s; retry %d of %d in %.2fs", self.url, problem,
                        state.attempt_number, self.max_retries,
                        state.upcoming_sleep)  # fmt: skip

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Retryable),
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self._wait_s,
            # A stopped batch cuts the wait short; the next attempt then sees the stop.
            sleep=stop.wait,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return retrying(self._attempt, body, stop)
        except _Retryable as exc:
            raise ServerError(
                f"model {self.name!r}: {self.url} failed {self.max_retries + 1} times, "
                f"last with {exc.problem}; is the server up?"
            ) from None

    def _attempt(self, body: bytes, stop: threading.Event) -> str:
        if stop.is_set() or not self.limit.acquire(stop):
            raise _Stopped("the batch stopped after another request failed")
        with self._lock:
            self.requests_sent += 1
        outcome, started = Outcome.FAILED, time.monotonic()
        try:
            text, outcome = self._exchange(body), Outcome.REPLY
            return text
        except _Retryable as exc:
            if exc.overload:
                outcome = Outcome.OVERLOADED
            raise
        finally:
            # Every path gives the slot back, a reply with its latency.
            latency = time.monotonic() - started if outcome is Outcome.REPLY else None
            self.limit.release(outcome, latency)

    def _exchange(self, body: bytes) -> str:
        """Post ``body`` once: the reply's text, or :class:`_Retryable` / :class:`ServerError`."""
        try:
            response = self._client.post(self.url, content=body)
        except httpx.TransportError as exc:  # refused, reset, timed out
            # A server that queues requests answers late, then not at all: overload.
            overload = isinstance(exc, httpx.TimeoutException)
            raise _Retryable(f"{type(exc).__name__}: {exc}", overload=overload) from None
        if response.status_code in RETRY_STATUS:
            raise _Retryable(
                f"HTTP {response.status_code}",
                retry_after_seconds(response.headers.get("Retry-After")),
                overload=response.status_code in OVERLOAD_STATUS,
            )
        if response.status_code >= 400:
            detail = response.content[:300].decode("utf-8", "replace")
            raise ServerError(f"{self.url} answered HTTP {response.status_code}: {detail}")
        try:
            return _reply_text(response.json())
        except (ValueError, KeyError, IndexError, TypeError):
            head = response.content[:200].decode("utf-8", "replace")
            raise _Retryable(f"a malformed reply (HTTP {response.status_code}): {head!r}") from None


def _data_url(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _reply_text(payload: Any) -> str:
    """The answer text of a chat-completions reply (KeyError/IndexError/TypeError if it
    is none)."""
    content = payload["choices"][0]["message"]["content"]
    if content is not None and not isinstance(content, str):
        raise TypeError("content is no string")
    return content or ""
