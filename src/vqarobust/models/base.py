"""The model adapter interface: answer questions about images, in batches."""

from __future__ import annotations

import inspect
import logging
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from vqarobust.models import DEFAULT_BATCH_SIZE
from vqarobust.models.feature_memory import FeatureMemory, content_key
from vqarobust.models.replies import ANSWERED, Reply, Responses

log = logging.getLogger(__name__)


class VQAModel(ABC):
    """A loaded VQA model. Constructor keyword arguments are the model's config entry.

    Subclasses implement :meth:`answer` for one batch (an answer string per request, or a
    :class:`~vqarobust.models.replies.Reply` where there is no answer); :meth:`respond`
    (which :meth:`answer_all` and :meth:`respond_all` wrap) sorts requests by question
    length (so an out-of-memory error shows on the first batch),
    batches them and restores the input order. A batch that runs out of memory is halved
    and retried. Other exceptions propagate: an empty answer would be a silently wrong
    score.

    An adapter that may answer on several threads at once, one :meth:`respond` call each,
    sets ``thread_safe`` (it guards what is not thread-safe itself): a job on the CPU
    then answers several chunks at once (:func:`vqarobust.inference.job_workers`).
    """

    thread_safe: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Inference calls respond: an override of answer_all or respond_all alone would
        # be skipped.
        for name in ("answer_all", "respond_all"):
            if name in vars(cls) and "respond" not in vars(cls):
                raise TypeError(
                    f"{cls.__name__} overrides {name}, which inference does not call: "
                    "override respond (docs/extending.md)"
                )

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size

    def parameter_count(self) -> int | None:
        """Parameters of every torch module the adapter holds (shared ones once); None
        when it holds none (a served model)."""
        modules = [
            v
            for v in vars(self).values()
            if callable(getattr(v, "parameters", None)) and hasattr(v, "named_modules")
        ]
        if not modules:
            return None
        seen: set[int] = set()
        total = 0
        for module in modules:
            for p in module.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    total += int(p.numel())
        return total

    @abstractmethod
    def answer(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """Answer one batch: ``questions[i]`` is asked about ``images[i]``."""

    def usage(self) -> dict[str, int]:
        """What the adapter has asked of a server so far (requests, retries, tokens):
        nothing for a model that runs here."""
        return {}

    def truncated(self, questions: Sequence[str]) -> list[bool]:
        """Per question, whether the model cuts it to its text-length limit (never, unless
        an adapter says otherwise)."""
        return [False] * len(questions)

    def image_attention(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[np.ndarray] | None:
        """Per request, the attention of the answer position over the image as a 2-D
        grid of patches (or regions) summing to 1; None when the model exposes none
        (docs/metrics.md, "Attention shift"). Adapters that can override it."""
        return None

    def request_order(self, images: Sequence[Any], questions: Sequence[str]) -> np.ndarray:
        """The order in which requests are batched: longest question first, so that the
        batch most likely to run out of memory comes first."""
        return np.argsort([-len(q) for q in questions], kind="stable")

    def answer_batch(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> tuple[list[str | Reply], list[str | Reply | None]]:
        """One batch's answers and, per answer, the raw reply it was cut from (None for a
        model that replies with a label: its answer is the reply)."""
        answers = self.answer(images, questions)
        return answers, [None] * len(answers)

    def answer_all(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[str],
        progress: Callable[[int], None] | None = None,
    ) -> list[str | None]:
        """Answer any number of requests in batches; returns answers in input order (None
        where a request got no answer: :meth:`respond` says why).

        ``progress`` is called with the number of requests of each finished batch."""
        return self.respond(images, questions, progress).answers

    def respond_all(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[str],
        progress: Callable[[int], None] | None = None,
    ) -> tuple[list[str | None], list[str | None]]:
        """As :meth:`answer_all`, with the raw replies beside the answers."""
        responses = self.respond(images, questions, progress)
        return responses.answers, responses.raw

    def respond(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[str],
        progress: Callable[[int], None] | None = None,
    ) -> Responses:
        """Every request's answer, raw reply, status and finish reason, in input order."""
        if len(images) != len(questions):
            raise ValueError(f"{len(images)} images but {len(questions)} questions")
        order = self.request_order(images, questions)
        out = Responses.sized(len(questions))
        start = 0
        while start < len(order):
            idx = order[start : start + self.batch_size]
            try:
                batch, replies = self.answer_batch(
                    [images[i] for i in idx], [questions[i] for i in idx]
                )
            except Exception as exc:
                if not self.halve_batch_after(exc):
                    raise
                continue  # the same requests, in a smaller batch
            if len(batch) != len(idx) or len(replies) != len(idx):
                raise RuntimeError(
                    f"{type(self).__name__}.answer_batch returned {len(batch)} answers and "
                    f"{len(replies)} replies for {len(idx)} questions"
                )
            for i, a, r in zip(idx, batch, replies, strict=True):
                out.set(int(i), a, r)
            start += len(idx)
            if progress is not None:
                progress(len(idx))
        return out

    def halve_batch_after(self, exc: BaseException) -> bool:
        """Whether a batch that raised ``exc`` is to be tried again: on running out of
        memory with more than one request in it, the batch size is halved (later batches
        keep the smaller size) and the allocator's cache given back."""
        if not is_out_of_memory(exc) or self.batch_size == 1:
            return False
        self.batch_size = max(1, self.batch_size // 2)
        log.warning("out of memory; batch size halved to %d", self.batch_size)
        _empty_cache()
        return True


class GeneratesReplies(VQAModel):
    """Mixin of the adapters that generate text: :meth:`reply` gives the raw replies of
    one batch, the answers are their :func:`~vqarobust.models.postprocess.short_answer`
    (docs/models.md, "From reply to answer"), and predictions keep both."""

    @abstractmethod
    def reply(self, images: Sequence[Any], questions: Sequence[str]) -> list[str | Reply]:
        """The raw replies of one batch, new tokens only, stripped of whitespace (a
        :class:`~vqarobust.models.replies.Reply` where the reply is no answer)."""

    def answer(self, images: Sequence[Any], questions: Sequence[str]) -> list[str | Reply]:
        """Short answers of one batch."""
        return self.answer_batch(images, questions)[0]

    def answer_batch(
        self, images: Sequence[Any], questions: Sequence[str]
    ) -> tuple[list[str | Reply], list[str | Reply | None]]:
        """The short answers of one batch beside its raw replies."""
        from vqarobust.models.postprocess import short_answer

        answers: list[str | Reply] = []
        raw: list[str | Reply | None] = []
        for r in self.reply(images, questions):
            if isinstance(r, Reply):
                text = r.text.strip() if r.text is not None else None
                answers.append(short_answer(text) if text and r.status == ANSWERED else r)
                raw.append(Reply(text, r.status, r.finish_reason))
            else:
                answers.append(short_answer(r.strip()))
                raw.append(r.strip())
        return answers, raw


class SharesImageFeatures(VQAModel):
    """Mixin: encode each distinct image once per :meth:`respond` call (which
    :meth:`answer_all` wraps).

    Features are cached by image object id, which is valid only while the caller holds
    the images, that is, within one call (the inference loop passes a chunk of questions
    whose images it keeps alive). An image's features leave the cache with its call's last
    request about it, so the cache holds the images that are half answered, not the
    chunk's. A bare :meth:`answer` call shares nothing between batches. Adapters call
    :meth:`image_features` once per batch.

    An adapter whose encoders take one image at a time (an image's features then do not
    depend on the other images of a call) sets ``keeps_features``: on the CPU its features
    are also kept across calls by the image's content
    (:mod:`vqarobust.models.feature_memory`).
    """

    share_image_features: bool = True
    keeps_features: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A respond call's cache belongs to its thread: calls on threads share nothing.
        self._calls = threading.local()
        self._memory = FeatureMemory()

    def respond(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[str],
        progress: Callable[[int], None] | None = None,
    ) -> Responses:
        """As :meth:`VQAModel.respond`, with image features shared across batches."""
        self._calls.current = _CallCache({}, Counter(map(id, images)))
        try:
            return super().respond(images, questions, progress)
        finally:
            self._calls.current = None

    def image_features(self, images: Sequence[Image.Image], encode: Any) -> list[Any]:
        """Per request, the features ``encode(list_of_images)`` gives its image (row i)."""
        if not self.share_image_features:
            encoded = encode(list(images))
            return [encoded[i] for i in range(len(images))]
        call = getattr(self._calls, "current", None)
        cache = call.features if call is not None else {}
        distinct, _ = distinct_images(images)
        missing = [im for im in distinct if id(im) not in cache]
        if missing:
            cache.update(self._encoded(missing, encode))
        features = [cache[id(im)] for im in images]
        if call is not None:
            # A batch retried after running out of memory counts twice: its images then
            # leave early and are encoded again, never answered from the wrong features.
            call.pending.subtract(map(id, images))
            for im in distinct:
                if call.pending[id(im)] <= 0:
                    cache.pop(id(im), None)
        return features

    def _encoded(self, images: list[Image.Image], encode: Any) -> dict[int, Any]:
        """Features by image object id: kept ones of the same pixels (PIL images on the
        CPU, :mod:`vqarobust.models.feature_memory`), the rest encoded and offered to
        the memory."""
        on_cpu = str(getattr(self, "device", "cpu")).startswith("cpu")
        kept = self.keeps_features and on_cpu and inspect.ismethod(encode)
        if not kept or not all(isinstance(im, Image.Image) for im in images):
            encoded = encode(images)
            return {id(im): encoded[i] for i, im in enumerate(images)}
        # The encoder is part of the key: an adapter may encode images in more than one way
        # (a bound method: its function, and the object whose weights it reads).
        encoder = (encode.__func__, id(encode.__self__))
        keys = {id(im): (encoder, content_key(im)) for im in images}
        found = {i: self._memory.get(key) for i, key in keys.items()}
        todo = [im for im in images if found[id(im)] is None]
        if todo:
            encoded = encode(todo)
            for i, im in enumerate(todo):
                found[id(im)] = encoded[i]
                self._memory.offer(keys[id(im)], encoded[i])
        return found


@dataclass
class _CallCache:
    """One :meth:`SharesImageFeatures.respond` call's features by image object id, and
    how many of its requests about each image are still to be answered."""

    features: dict[int, Any]
    pending: Counter[int]


def distinct_images(images: Sequence[Image.Image]) -> tuple[list[Image.Image], Any]:
    """The distinct image objects of a batch and, per request, the index of its image.

    Requests about the same image share one PIL object (the inference loop decodes each
    image once), so identity finds them without hashing pixels.
    """
    import torch

    position: dict[int, int] = {}
    distinct: list[Image.Image] = []
    for im in images:
        if id(im) not in position:
            position[id(im)] = len(distinct)
            distinct.append(im)
    return distinct, torch.tensor([position[id(im)] for im in images], dtype=torch.long)


def torch_dtype(name: str, device: Any) -> Any:
    """The torch dtype for a config name: ``auto`` is bfloat16 on CUDA, float32 on CPU."""
    import torch

    if name == "auto":
        return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in table:
        raise ValueError(f"unknown dtype {name!r}; use auto, {', '.join(table)}")
    return table[name]


def resolved_precision(spec: Mapping[str, Any], device: str) -> dict[str, str]:
    """The device type and dtype a model entry answers in on ``device``, as fingerprints and
    provenance record them: ``{"device": "cpu", "dtype": "float32"}`` for ``dtype: auto``
    on the CPU, ``cuda``/``bfloat16`` on a GPU. A served model computes elsewhere, in
    what precision it does not say."""
    if spec.get("family") == "openai-chat":
        return {"device": "served", "dtype": "unknown (served)"}
    import torch

    dtype = torch_dtype(spec.get("dtype") or "auto", device)
    return {"device": torch.device(device).type, "dtype": str(dtype).removeprefix("torch.")}


def is_out_of_memory(exc: BaseException) -> bool:
    """True for a CUDA (or CPU allocator) out-of-memory error."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def _empty_cache() -> None:
    """Give the CUDA allocator's cached blocks back after an out-of-memory error (nothing
    on the CPU)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
