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
or an HTTP date) plus a jitter, up to ``max_retries`` times; a request still failing then
is recorded as ``failed`` (:mod:`vqarobust.models.replies`); a server that never replied,
or failed ``FAILED_IN_A_ROW`` requests in a row, fails the job with :class:`ServerError`
naming the URL and the last problem (it is down, not busy). An empty reply, and a filtered
one with ``retry_filtered``, is retried the same way before its status is recorded. A
reply's ``finish_reason`` decides what it is: ``content_filter`` is ``filtered``,
``length`` with no text ``truncated``, no text (content null or blank; a reasoning model's
text only in ``reasoning_content``) ``empty``. The API key is read from the environment
variable ``api_key_env`` names; it never appears in the config, the params or the logs.
The adapter counts requests, retries and the tokens the replies' ``usage`` reports
(:meth:`OpenAIChatVQA.usage`), stops at ``request_budget`` requests, and learns which
model answers with one probe (:meth:`OpenAIChatVQA.identity`). Resuming after a kill is
the inference loop's.
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
from collections.abc import Mapping, Sequence
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
from vqarobust.models.endpoint import check_endpoint
from vqarobust.models.replies import ANSWERED, EMPTY, FAILED, FILTERED, TRUNCATED, Reply

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
BACKOFF_S = 0.5  # the first retry waits up to this, doubling each time
MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 120.0  # a Retry-After longer than this is cut to it


class ServerError(RuntimeError):
    """The server refused a request, or failed every request of a batch."""


class BudgetSpent(ServerError):
    """The entry's ``request_budget`` is spent."""


class _Retryable(Exception):
    """A failed attempt worth repeating; ``retry_after`` is the server's wish, if any;
    ``overload`` whether it says the server has too much to do (429, 503, a timeout)."""

    def __init__(
        self,
        problem: str,
        retry_after: float | None = None,
        overload: bool = False,
        reply: Reply | None = None,
    ) -> None:
        super().__init__(problem)
        self.problem, self.retry_after, self.overload = problem, retry_after, overload
        # A reply that is no answer (empty, filtered): recorded as it is once retries end.
        self.reply = reply


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
    server, :mod:`vqarobust.models.concurrency`), the timeout of one request, the
    retries of a failed one (backoff with jitter, ``Retry-After`` honoured; filtered
    replies too with ``retry_filtered``) and the most requests the adapter sends
    (``request_budget``; None: no limit)."""

    api_key_env: str | None = None
    max_concurrency: int = 8
    timeout_s: float = 60.0
    max_retries: int = 3
    adaptive_concurrency: bool = True
    retry_filtered: bool = False
    request_budget: int | None = None


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
        timeout, retries, budget). ``device`` is the job's and unused: the server holds the
        model."""
        super().__init__(batch_size=batch_size)
        link = Transport(**transport)
        check_endpoint(name, base_url, link.api_key_env)
        if "{question}" not in prompt:
            raise ValueError(f"model {name!r}: prompt must contain '{{question}}', got {prompt!r}")
        if link.max_concurrency < 1 or link.max_retries < 0 or link.timeout_s <= 0:
            raise ValueError(
                f"model {name!r}: need max_concurrency >= 1, max_retries >= 0, timeout_s > 0"
            )
        if link.request_budget is not None and link.request_budget < 1:
            raise ValueError(f"model {name!r}: request_budget must be >= 1")
        self.retry_filtered, self.request_budget = link.retry_filtered, link.request_budget
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.prompt, self.name = model, prompt, name
        self.max_concurrency = link.max_concurrency
        self.timeout_s, self.max_retries = link.timeout_s, link.max_retries
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
        self.counts = {"retries": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self._replied, self._in_a_row = False, 0
        # (model, system_fingerprint) of every reply, as the server names itself.
        self.identities: set[tuple[str | None, str | None]] = set()
        self._random = random.Random(f"{name}:{seed}")  # jitter only: never an answer
        self._client = httpx.Client(
            headers=self._headers,
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(
                max_connections=max_concurrency, max_keepalive_connections=max_concurrency
            ),
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

    def usage(self) -> dict[str, int]:
        """Requests sent, retries, and the prompt and completion tokens the replies'
        ``usage`` reported, so far."""
        with self._lock:
            return {"requests": self.requests_sent, **self.counts}

    def identity(self) -> dict[str, str | None]:
        """Which model the server answers as, from one short text request: the reply's
        ``model`` and ``system_fingerprint`` (None where the server sends none)."""
        body = json.dumps(
            {
                "model": self.model,
                "messages": [{"role": "user", "content": "Reply with OK."}],
                "temperature": 0,
                "max_tokens": 1,
                "seed": self.seed,
            }
        ).encode("utf-8")
        with self._lock:
            self.identities.clear()
        reply = self._post(body, threading.Event())
        if reply.status == FAILED:
            raise ServerError(f"model {self.name!r}: {self.url} {reply.text}; is the server up?")
        with self._lock:
            seen = sorted(self.identities, key=str)
        served_as, fingerprint = seen[-1] if seen else (None, None)
        return {"replies_as": served_as, "system_fingerprint": fingerprint}

    def reply(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str | Reply]:
        """The server's replies for one batch, ``max_concurrency`` requests at a time; a
        request that fails for good is a ``failed`` reply. A server that never replied, or
        failed :data:`FAILED_IN_A_ROW` requests in a row, fails the job: it is down."""
        urls: dict[int, str] = {}
        for im in images:  # each distinct image encoded once
            if id(im) not in urls:
                urls[id(im)] = _data_url(im)
        bodies = [self._body(urls[id(im)], q) for im, q in zip(images, questions, strict=True)]
        stop = threading.Event()

        def one(body: bytes) -> Reply:
            try:
                return self._post(body, stop)
            except BaseException:
                stop.set()  # a refused request (HTTP 400, a spent budget) ends the job
                raise

        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            futures: list[Future[Reply]] = [pool.submit(one, b) for b in bodies]
            wait(futures, return_when=FIRST_EXCEPTION)
            for f in futures:
                f.cancel()  # those not started yet are never sent
        failed = [f.exception() for f in futures if not f.cancelled() and f.exception()]
        fatal = [e for e in failed if not isinstance(e, _Stopped)]
        if fatal or failed:
            raise (fatal or failed)[0]
        replies = [f.result() for f in futures]
        self._note_failures(replies)
        return list(replies)

    def _note_failures(self, replies: Sequence[Reply]) -> None:
        """Fail the job when the server looks down rather than busy."""
        lost = [r for r in replies if r.status == FAILED]
        with self._lock:
            self._replied |= len(lost) < len(replies)
            self._in_a_row = self._in_a_row + len(lost) if len(lost) == len(replies) else 0
            down = lost and (not self._replied or self._in_a_row >= FAILED_IN_A_ROW)
        if down:
            raise ServerError(
                f"model {self.name!r}: {self.url} {lost[-1].text}, and {self._in_a_row} "
                "requests in a row failed with no reply between; is the server up?"
            )

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

    def _post(self, body: bytes, stop: threading.Event) -> Reply:
        """One request with retries: the reply, or a ``failed`` one after the retries."""

        def before_sleep(state: tenacity.RetryCallState) -> None:
            problem = state.outcome.exception().problem  # type: ignore[union-attr]
            with self._lock:
                self.counts["retries"] += 1
            log.warning(
                "%s: %s; retry %d of %d in %.2fs",
                self.url,
                problem,
                state.attempt_number,
                self.max_retries,
                state.upcoming_sleep,
            )

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
            if exc.reply is not None:
                return exc.reply
            return Reply(f"failed {self.max_retries + 1} times, last with {exc.problem}", FAILED)

    def _attempt(self, body: bytes, stop: threading.Event) -> Reply:
        if stop.is_set() or not self.limit.acquire(stop):
            raise _Stopped("the batch stopped after another request failed")
        with self._lock:
            if self.request_budget is not None and self.requests_sent >= self.request_budget:
                self.limit.release(Outcome.FAILED, None)
                raise BudgetSpent(
                    f"model {self.name!r}: the request budget of {self.request_budget} "
                    "requests (request_budget) is spent; finished chunks are kept, so a "
                    "rerun with a larger budget asks only what is left"
                )
            self.requests_sent += 1
        outcome, started = Outcome.FAILED, time.monotonic()
        try:
            reply, outcome = self._exchange(body), Outcome.REPLY
        except _Retryable as exc:
            if exc.overload:
                outcome = Outcome.OVERLOADED
            raise
        finally:
            # Every path gives the slot back, a reply with its latency.
            latency = time.monotonic() - started if outcome is Outcome.REPLY else None
            self.limit.release(outcome, latency)
        if reply.status == EMPTY or (reply.status == FILTERED and self.retry_filtered):
            raise _Retryable(f"a reply with no answer ({reply.status})", reply=reply)
        return reply

    def _exchange(self, body: bytes) -> Reply:
        """Post ``body`` once: the reply, or :class:`_Retryable` / :class:`ServerError`."""
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
            payload = response.json()
            reply = read_reply(payload)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            head = response.content[:200].decode("utf-8", "replace")
            raise _Retryable(f"a malformed reply (HTTP {response.status_code}): {head!r}") from None
        self._account(payload)
        return reply

    def _account(self, payload: Mapping[str, Any]) -> None:
        """Count the reply's tokens and note which model it says answered."""
        usage = payload.get("usage") or {}
        with self._lock:
            for key in ("prompt_tokens", "completion_tokens"):
                value = usage.get(key)
                if isinstance(value, int):
                    self.counts[key] += value
            self.identities.add((payload.get("model"), payload.get("system_fingerprint")))


# Requests failed for good one after another, with no reply between, that end the job.
FAILED_IN_A_ROW = 16


def _data_url(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def read_reply(payload: Any) -> Reply:
    """What a chat-completions reply is (KeyError/IndexError/TypeError if it is none): its
    text, and the status its ``finish_reason`` and text make it."""
    choice = payload["choices"][0]
    message = choice["message"]
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError("content is no string")
    finish = choice.get("finish_reason")
    text = content if content and content.strip() else None
    if finish == "content_filter" or (text is None and message.get("refusal")):
        return Reply(text or message.get("refusal"), FILTERED, finish)
    if text is not None:
        return Reply(text, ANSWERED, finish)
    # No answer text: a reasoning model's thoughts are kept as the raw reply, never scored.
    thoughts = message.get("reasoning_content") or message.get("reasoning")
    return Reply(thoughts, TRUNCATED if finish == "length" else EMPTY, finish)
