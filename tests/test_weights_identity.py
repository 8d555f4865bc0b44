"""The weights a job records are the weights it loaded (issue 44, item 2): resolved (and
downloaded, when allowed) before they are fingerprinted, then loaded from the very folder
that was identified. A Hub of one's own on 127.0.0.1 (tests/hub_server.py) serves the
tiny checkpoints, so the download happens inside the job, as it would on a first run."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.hub_server import HubServer, point_at, serve
from vqarobust import store
from vqarobust.inference import Subset, run_inference
from vqarobust.models import ModelRef
from vqarobust.provenance import prediction_records


def recorded(path) -> dict:
    return json.loads(pq.read_schema(path).metadata[store.INPUTS_KEY])["inputs"]


def refuse(*args, **kwargs):
    raise AssertionError("the model was loaded although every chunk was finished")


def answers(path) -> list:
    return pq.read_table(path).sort_by("question_id").column("answer").to_pylist()


@pytest.fixture
def hub(checkpoints, tmp_path, monkeypatch):
    """``org/cnn`` at one commit (the tiny CNN+BoW), an empty Hub cache."""
    server = HubServer()
    server.publish("org/cnn", checkpoints["cnn-bow"])
    with serve(server):
        point_at(monkeypatch, server.url, tmp_path / "hub-cache")
        yield server


def test_weights_downloaded_in_the_job_are_the_ones_fingerprinted(
    hub, checkpoints, easy_vqa_eval, tmp_path
):
    first = hub.repos["org/cnn"].refs["main"]
    spec = {"family": "vqa-classifier", "path_or_id": "org/cnn"}
    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    questions = easy_vqa_eval["questions"]
    out = tmp_path / "a.parquet"
    run_inference(ModelRef("cnn", spec, {"allow_download": True}), questions, subsets, out, "cpu")
    assert any(r.startswith("GET /org/cnn/resolve/") for r in hub.requests)  # downloaded here
    # Before, the identity was taken before the download: the commit was None.
    assert recorded(out)["checkpoint"]["path_or_id"] == {
        "hub_id": "org/cnn",
        "revision": None,
        "commit": first,
    }
    assert prediction_records([out])[0]["inputs"]["checkpoint"]["path_or_id"]["commit"] == first

    # The same job again, downloads off: the cache now holds the commit, the fingerprint is
    # unchanged, and every finished chunk is reused without loading the model. Before, the
    # fingerprint changed from None to the commit and all of it was computed again.
    hub.requests.clear()
    run_inference(ModelRef("cnn", spec, loader=refuse), questions, subsets, out, "cpu")
    assert hub.requests == []
    assert recorded(out)["checkpoint"]["path_or_id"]["commit"] == first

    # The branch moves to other weights. A job that may download loads the new commit, and
    # records that commit, not the one the cache held before it ran.
    second = hub.publish("org/cnn", checkpoints["cnn-film"])
    moved = tmp_path / "b.parquet"
    run_inference(ModelRef("cnn", spec, {"allow_download": True}), questions, subsets, moved, "cpu")
    assert recorded(moved)["checkpoint"]["path_or_id"]["commit"] == second
    local = tmp_path / "film.parquet"
    film = {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-film"])}
    run_inference(ModelRef("cnn", film), questions, subsets, local, "cpu")
    assert answers(moved) == answers(local)
    assert answers(moved) != answers(out)


def test_a_pinned_revision_loads_that_commit_whatever_the_branch(
    hub, checkpoints, easy_vqa_eval, tmp_path
):
    first = hub.repos["org/cnn"].refs["main"]
    hub.publish("org/cnn", checkpoints["cnn-film"])
    spec = {"family": "vqa-classifier", "path_or_id": "org/cnn", "revision": first}
    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    out, local = tmp_path / "pinned.parquet", tmp_path / "bow.parquet"
    run_inference(
        ModelRef("cnn", spec, {"allow_download": True}),
        easy_vqa_eval["questions"],
        subsets,
        out,
        "cpu",
    )
    assert recorded(out)["checkpoint"]["path_or_id"] == {
        "hub_id": "org/cnn",
        "revision": first,
        "commit": first,
    }
    bow = {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-bow"])}
    run_inference(ModelRef("cnn", bow), easy_vqa_eval["questions"], subsets, local, "cpu")
    assert answers(out) == answers(local)


def test_weights_that_cannot_be_resolved_fail_before_any_work(hub, easy_vqa_eval, tmp_path):
    from vqarobust.models.loading import MissingWeightsError

    spec = {"family": "vqa-classifier", "path_or_id": "org/cnn"}
    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    out = tmp_path / "c.parquet"
    with pytest.raises(MissingWeightsError, match=r"model 'cnn'.*not in the local"):
        run_inference(
            ModelRef("cnn", spec, loader=refuse), easy_vqa_eval["questions"], subsets, out, "cpu"
        )
    assert not out.exists() and not (tmp_path / "c.parquet.chunks").exists()
