"""Adapter for models served behind the OpenAI chat-completions protocol (vLLM, TGI,
SGLang, a hosted API): family ``openai-chat``.

Each question is one request: the image as a base64 PNG data URL and the same short-answer
prompt as the in-process chat models, decoded deterministically (temperature 0, and a
seed, which servers that support it honour). Up to ``max_concurrency`` requests are in
flight; 429, 5xx, timeouts and refused connections are retried with exponential backoff
(``Retry-After`` honoured), up to ``max_retries`` times, then the job fails with a message
naming the URL. The API key is read from the environment variable ``api_key_env`` names;
it never appears in the config, the params or the logs. Resuming after a kill is the
inference loop's (finished chunks are kept).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from PIL import Image

from vqarobust.models.base import VQAModel
from vqarobust.models.chat import DEFAULT_PROMPT
from vqarobust.models.postprocess import short_answer

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
BACKOFF_S = 0.5  # first retry after this, doubling
MAX_BACKOFF_S = 30.0


class ServerError(RuntimeError):
    """The server refused or failed a request beyond the retries."""


class OpenAIChatVQA(VQAModel):
    """A VQA model behind ``{base_url}/chat/completions``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        max_concurrency: int = 8,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        prompt: str = DEFAULT_PROMPT,
        max_new_tokens: int = 10,
        seed: int = 0,
        batch_size: int = 64,
        name: str = "model",
        device: str = "cpu",
    ) -> None:
        super().__init__(batch_size=batch_size)
        if "{question}" not in prompt:
            raise ValueError(f"model {name!r}: prompt must contain '{{question}}', got {prompt!r}")
        if max_concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ValueError(
                f"model {name!r}: need max_concurrency >= 1, max_retries >= 0, timeout_s > 0"
            )
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.prompt, self.name = model, prompt, name
        self.max_concurrency, self.timeout_s, self.max_retries = (
            max_concurrency, timeout_s, max_retries,
        )  # fmt: skip
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self._headers = {"Content-Type": "application/json"}
        if api_key_env is not None:
            key = os.environ.get(api_key_env)
            if not key:
                raise ValueError(
                    f"model {name!r}: the environment variable {api_key_env} (api_key_env) "
                    "is not set"
                )
            self._headers["Authorization"] = f"Bearer {key}"
        self._lock = threading.Lock()
        self.requests_sent = 0

    def answer(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """Short answers for one batch, ``max_concurrency`` requests at a time."""
        urls: dict[int, str] = {}
        for im in images:  # each distinct image object encoded once
            if id(im) not in urls:
                urls[id(im)] = _data_url(im)
        bodies = [self._body(urls[id(im)], q) for im, q in zip(images, questions, strict=True)]
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            replies = list(pool.map(self._post, bodies))
        return [short_answer(r) for r in replies]

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

    def _post(self, body: bytes) -> str:
        """One request with retries; the reply's text."""
        for attempt in range(self.max_retries + 1):
            wait = min(BACKOFF_S * 2**attempt, MAX_BACKOFF_S)
            try:
                with self._lock:
                    self.requests_sent += 1
                request = urllib.request.Request(self.url, body, self._headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return _reply_text(json.loads(response.read()), self.url)
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:300].decode("utf-8", "replace")
                if exc.code not in RETRY_STATUS:
                    raise ServerError(f"{self.url} answered HTTP {exc.code}: {detail}") from None
                problem = f"HTTP {exc.code}"
                after = exc.headers.get("Retry-After") if exc.headers else None
                if after and after.replace(".", "", 1).isdigit():
                    wait = min(float(after), MAX_BACKOFF_S)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                problem = f"{type(reason).__name__}: {reason}"
            if attempt == self.max_retries:
                raise ServerError(
                    f"model {self.name!r}: {self.url} failed {self.max_retries + 1} times, "
                    f"last with {problem}; is the server up?"
                )
            log.warning("%s: %s; retry %d of %d in %.1fs", self.url, problem, attempt + 1,
                        self.max_retries, wait)  # fmt: skip
            time.sleep(wait)
        raise AssertionError("unreachable")


def _data_url(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _reply_text(payload: Any, url: str) -> str:
    try:
        return str(payload["choices"][0]["message"]["content"] or "")
    except (KeyError, IndexError, TypeError):
        raise ServerError(f"{url}: not a chat-completions reply: {str(payload)[:300]}") from None
