"""The openai-chat adapter against a local chat-completions server backed by the tiny LLaVA."""

import contextlib
import logging
import socket
import time

import polars as pl
import pytest
import yaml

from tests.chat_server import QUESTIONS, ChatServer, chat_client, solid_images
from tests.conftest import REPO
from tests.tiny_checkpoints import tiny_llava
from vqarobust import store
from vqarobust.inference import Subset, run_inference
from vqarobust.models import ModelRef, load_model
from vqarobust.models.served import ServerError
from vqarobust.params import answer_spec

# Servers with delays, timeouts and retries: about 25 s (tests/conftest.py orders by it).
COST_SECONDS = 25


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    path = tiny_llava(tmp_path_factory.mktemp("llava") / "llava")
    # The server gets the full prompt text; its model asks it as it is.
    model = load_model(
        {"family": "llava", "path_or_id": str(path), "prompt": "{question}", "max_new_tokens": 4},
        device="cpu",
    )
    return path, lambda image, text: model.answer([image], [text])[0]


def test_answers_are_the_served_models(llava):
    path, answer = llava
    direct = load_model(
        {"family": "llava", "path_or_id": str(path), "max_new_tokens": 4}, device="cpu"
    )
    images = solid_images(4)
    with ChatServer(answer) as server:
        got = chat_client(server.base_url).answer_all(images, QUESTIONS)
    assert got == direct.answer_all(images, QUESTIONS)
    assert server.requests == 4


def test_concurrency_reaches_the_limit_and_no_more(llava):
    _, answer = llava
    with ChatServer(answer, delay_s=0.3) as server:
        client = chat_client(
            server.base_url, max_concurrency=4, batch_size=12, adaptive_concurrency=False
        )
        client.answer_all(solid_images(12), QUESTIONS * 3)
    assert server.max_in_flight == 4


def test_retries_on_server_errors_then_succeeds(llava, caplog):
    _, answer = llava
    with ChatServer(answer, fail_first=2, fail_status=503) as server:
        client = chat_client(server.base_url, max_concurrency=1, max_retries=3)
        with caplog.at_level(logging.WARNING):
            got = client.answer_all(solid_images(2), QUESTIONS[:2])
    assert len(got) == 2 and server.requests == 4 and client.requests_sent == 4
    assert "HTTP 503; retry 1 of 3" in caplog.text


def test_a_slow_server_times_out_and_fails_naming_the_url(llava):
    _, answer = llava
    with ChatServer(answer, delay_s=2.0) as server:
        client = chat_client(server.base_url, timeout_s=0.3, max_retries=1)
        t = time.perf_counter()
        with pytest.raises(ServerError, match=f"{server.base_url}/chat/completions failed 2 "):
            client.answer_all(solid_images(1), QUESTIONS[:1])
    assert time.perf_counter() - t < 10  # seconds, not the default 60 s timeout x retries
    assert client.limit.in_flight == 0  # every attempt gave its slot back


def test_a_server_that_is_down_fails_within_seconds():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = chat_client(f"http://127.0.0.1:{port}/v1", max_retries=2)
    t = time.perf_counter()
    with pytest.raises(ServerError, match=f"127.0.0.1:{port}/v1/chat/completions.*server up"):
        client.answer_all(solid_images(1), QUESTIONS[:1])
    assert time.perf_counter() - t < 10  # refused at once; backoff 0.5 s + 1 s


def test_a_refused_request_is_not_retried(llava):
    _, answer = llava
    server = ChatServer(answer, fail_first=5, fail_status=400)
    client = chat_client(server.base_url, max_retries=3)
    with server, pytest.raises(ServerError, match="HTTP 400"):
        client.answer_all(solid_images(1), QUESTIONS[:1])
    assert server.requests == 1 and client.limit.in_flight == 0


def test_api_key_comes_from_the_environment_and_stays_out_of_logs(llava, monkeypatch, caplog):
    _, answer = llava
    monkeypatch.setenv("VQAROBUST_TEST_API_KEY", "sk-secret-123")
    with ChatServer(answer, fail_first=1) as server, caplog.at_level(logging.DEBUG):
        chat_client(server.base_url, api_key_env="VQAROBUST_TEST_API_KEY").answer_all(
            solid_images(1), QUESTIONS[:1]
        )
    assert server.headers[-1]["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret-123" not in caplog.text
    monkeypatch.delenv("VQAROBUST_TEST_API_KEY")
    with pytest.raises(ValueError, match="VQAROBUST_TEST_API_KEY"):
        chat_client(server.base_url, api_key_env="VQAROBUST_TEST_API_KEY")


def test_a_killed_run_resumes_from_its_finished_chunks(llava, easy_vqa_eval, tmp_path):
    _, answer = llava
    n_q = store.read_questions(easy_vqa_eval["questions"]).num_rows
    spec = {"family": "openai-chat", "model": "tiny-llava", "max_new_tokens": 4, "device": "cpu"}
    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    out = tmp_path / "pred.parquet"
    with ChatServer(answer, fail_after=20) as server:
        options = {"base_url": server.base_url, "batch_size": 8, "max_retries": 0}
        with pytest.raises(ServerError, match="HTTP 400"):
            run_inference(
                ModelRef("served", spec, options=options),
                easy_vqa_eval["questions"],
                subsets,
                out,
                chunk_size=8,
            )
    assert not out.exists()
    done = len(list((tmp_path / "pred.parquet.chunks").glob("*.parquet")))
    assert done >= 2
    with ChatServer(answer) as server:
        options = {"base_url": server.base_url, "batch_size": 8}
        run_inference(
            ModelRef("served", spec, options=options),
            easy_vqa_eval["questions"],
            subsets,
            out,
            chunk_size=8,
        )
    # Only the unfinished chunks, and the one probe that asks who answers.
    assert server.requests == n_q - 8 * done + 1
    assert pl.read_parquet(out).height == n_q


def test_a_served_model_asks_for_no_gpu_and_its_key_reruns_nothing():
    from vqarobust.config import validate_config

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["models"] = {
        "served": {
            "family": "openai-chat",
            "base_url": "https://node:8000/v1",
            "model": "llava",
            "api_key_env": "NODE_API_KEY",
        }
    }
    validate_config(config)
    entry = config["models"]["served"]
    assert entry["device"] == "cpu"
    spec = answer_spec(entry)
    assert "base_url" not in spec and "api_key_env" not in spec and spec["model"] == "llava"
    # Where it is served keys the answers (another server, maybe another model), the
    # URL's credentials do not.
    assert spec["endpoint"] == "https://node:8000/v1"
    moved = answer_spec({**entry, "base_url": "http://other:8000/v1/"})
    assert moved["endpoint"] == "http://other:8000/v1"
    from vqarobust.config import ConfigError

    for bad, message in (
        ({"base_url": "node:8000"}, "base_url"),
        ({"path_or_id": "x"}, "models.served.path_or_id: applies to family .* not openai-chat"),
        ({"device": "cuda"}, "asks for no GPU"),
    ):
        config["models"] = {
            "served": {
                "family": "openai-chat",
                "model": "llava",
                "base_url": "http://node:8000/v1",
                **bad,
            }
        }
        with pytest.raises(ConfigError, match=message):
            validate_config(config)


def test_connections_are_pooled(llava):
    _, answer = llava
    with ChatServer(answer) as server:
        chat_client(server.base_url, max_concurrency=2, batch_size=12).answer_all(
            solid_images(12), QUESTIONS * 3
        )
    assert server.requests == 12 and len(server.ports) <= 2  # kept alive, not one per request


def test_retries_are_jittered_so_failed_threads_do_not_return_in_lockstep(llava, caplog):
    _, answer = llava
    with ChatServer(answer, fail_first=8) as server:
        # Eight in flight at once from the start, so that eight fail together.
        client = chat_client(
            server.base_url,
            max_concurrency=8,
            batch_size=8,
            max_retries=3,
            adaptive_concurrency=False,
        )
        with caplog.at_level(logging.WARNING):
            client.answer_all(solid_images(8), QUESTIONS * 2)
    assert server.requests == 16
    first, retried = sorted(server.times[:8]), sorted(server.times[8:])
    waits = [float(m) for m in __import__("re").findall(r"retry 1 of 3 in ([0-9.]+)s", caplog.text)]
    assert len(waits) == 8 and len(set(waits)) >= 6 and all(0 <= w <= 0.5 for w in waits)
    # Without jitter all eight would come back within a few ms of each other.
    assert retried[-1] - retried[0] > 0.05 and retried[0] >= first[0]


def test_retry_after_as_an_http_date_is_honoured(llava, caplog):
    import email.utils

    _, answer = llava

    def two_seconds_from_now():
        return email.utils.formatdate(time.time() + 2, usegmt=True)

    with ChatServer(
        answer, fail_first=1, fail_status=429, retry_after=two_seconds_from_now
    ) as server:
        client = chat_client(server.base_url, max_concurrency=1)
        with caplog.at_level(logging.WARNING):
            client.answer_all(solid_images(1), QUESTIONS[:1])
    # The date has one-second resolution: the wait is over one second, at most 2.5.
    assert server.requests == 2 and server.times[1] - server.times[0] >= 1.0
    assert "HTTP 429; retry 1 of 3 in" in caplog.text


def test_retry_after_parsing():
    import datetime as dt

    from vqarobust.models.served import retry_after_seconds

    now = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)
    assert retry_after_seconds("3", now) == 3.0
    assert retry_after_seconds("1.5", now) == 1.5
    assert retry_after_seconds("Tue, 01 Dec 2026 12:00:07 GMT", now) == 7.0
    assert retry_after_seconds("Tue, 01 Dec 2026 11:00:00 GMT", now) == 0.0  # past
    assert retry_after_seconds("soon", now) is None and retry_after_seconds(None) is None


def test_a_malformed_body_is_retried_then_reported_with_the_url_and_its_first_bytes(llava, caplog):
    _, answer = llava
    with ChatServer(answer, malformed_first=1) as server, caplog.at_level(logging.WARNING):
        got = chat_client(server.base_url, max_concurrency=1).answer_all(
            solid_images(1), QUESTIONS[:1]
        )
    assert len(got) == 1 and server.requests == 2
    assert "a malformed reply (HTTP 200): '<html>upstream proxy hiccup</html>'" in caplog.text
    wanted = (
        r"/v1/chat/completions failed 2 times, last with a malformed reply "
        r"\(HTTP 200\): '<html>upstream"
    )
    with ChatServer(answer, malformed_first=10) as server, pytest.raises(ServerError, match=wanted):
        chat_client(server.base_url, max_retries=1).answer_all(solid_images(1), QUESTIONS[:1])


def test_a_fatal_error_stops_the_rest_of_the_batch(llava):
    _, answer = llava
    with ChatServer(answer, fail_after=3) as server:
        client = chat_client(server.base_url, max_concurrency=2, batch_size=40)
        with pytest.raises(ServerError, match="HTTP 400"):
            client.answer_all(solid_images(40), QUESTIONS * 10)
    assert client.limit.in_flight == 0  # the stopped requests never took a slot
    # What was answered, the refused one and at most one more already in flight beside
    # it; nothing of the other ~35 questions is sent.
    assert server.requests <= server.answered + 2 and server.requests < 10


def test_the_docs_name_exactly_the_retried_statuses():
    import re

    from tests.conftest import REPO
    from vqarobust.models.served import RETRY_STATUS

    text = " ".join((REPO / "docs" / "models.md").read_text().split())
    listed = re.search(r"HTTP ((?:\d{3}, )+\d{3} and \d{3}), timeouts", text).group(1)
    assert {int(n) for n in re.findall(r"\d{3}", listed)} == set(RETRY_STATUS)


def test_each_way_a_request_ends_reaches_the_limit_as_its_outcome(llava):
    """What the adaptive limit hears: a reply with its latency; a 429, a 503 or a timeout
    as overload; a 502, a malformed body or a refused request as a failure that moves it
    neither way."""
    from vqarobust.models.concurrency import ConcurrencyLimit, Outcome

    class Recording(ConcurrencyLimit):
        def release(self, outcome, latency_s=None):
            self.outcomes.append((outcome, latency_s is not None))
            super().release(outcome, latency_s)

    _, answer = llava
    cases = [
        ({"fail_first": 1, "fail_status": 429}, {}, Outcome.OVERLOADED),
        ({"fail_first": 1, "fail_status": 503}, {}, Outcome.OVERLOADED),
        ({"fail_first": 1, "fail_status": 502}, {}, Outcome.FAILED),
        ({"malformed_first": 1}, {}, Outcome.FAILED),
        ({"delay_s": 1.0}, {"timeout_s": 0.2, "max_retries": 0}, Outcome.OVERLOADED),
        ({"fail_first": 1, "fail_status": 400}, {}, Outcome.FAILED),
    ]
    for server_kw, client_kw, first in cases:
        with ChatServer(answer, **server_kw) as server:
            client = chat_client(server.base_url, **client_kw)
            client.limit = Recording(ceiling=8)
            client.limit.outcomes = []
            # The 400 and the timeout without retries end the batch; the rest recover.
            with contextlib.suppress(ServerError):
                client.answer_all(solid_images(1), QUESTIONS[:1])
        assert client.limit.outcomes[0] == (first, False), server_kw
        if len(client.limit.outcomes) > 1:  # the retry's reply, with its latency
            assert client.limit.outcomes[1] == (Outcome.REPLY, True), server_kw
        assert client.limit.in_flight == 0
