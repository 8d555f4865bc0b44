"""Finished inference kept by content (vqarobust.resume): a severity added, a job resumed
with its subsets changed, and answers computed on another device or in another dtype."""

import json

import polars as pl
import pyarrow.parquet as pq
import pytest

from tests.counting_models import Counting
from vqarobust import store
from vqarobust.inference import Subset, run_inference
from vqarobust.materialize.images import corrupt_subset
from vqarobust.models import ModelRef


@pytest.fixture(scope="module")
def snow(easy_vqa_eval, tmp_path_factory):
    root = tmp_path_factory.mktemp("snow")
    for severity in (1, 2, 3):
        corrupt_subset(easy_vqa_eval["images"], root / f"s{severity}", "snow", severity)
    return {sev: Subset("snow", sev, str(root / f"s{sev}")) for sev in (1, 2, 3)}


def _run(easy_vqa_eval, subsets, out, model, device="cpu", spec=None):
    ref = ModelRef("m", spec or {"family": "t"}, loader=lambda *a, **k: model)
    return run_inference(ref, easy_vqa_eval["questions"], subsets, out, device, chunk_size=8)


def _n_q(easy_vqa_eval):
    return store.read_questions(easy_vqa_eval["questions"]).num_rows


def test_adding_a_severity_computes_only_the_new_one(easy_vqa_eval, snow, tmp_path):
    out = tmp_path / "pred.parquet"
    _run(easy_vqa_eval, [snow[1], snow[2]], out, Counting())
    first = pl.read_parquet(out)
    model = Counting()
    n = _run(easy_vqa_eval, [snow[1], snow[2], snow[3]], out, model)
    n_q = _n_q(easy_vqa_eval)
    assert n == 3 * n_q
    assert model.answered == n_q  # severities 1 and 2 come from their kept chunks
    after = pl.read_parquet(out)
    assert after.filter(pl.col("severity") < 3).equals(first)


def test_a_job_with_nothing_new_loads_no_model(easy_vqa_eval, snow, tmp_path):
    out = tmp_path / "pred.parquet"
    _run(easy_vqa_eval, [snow[1], snow[2]], out, Counting())

    def refuse(*args, **kwargs):
        raise AssertionError("loaded a model with every chunk finished")

    ref = ModelRef("m", {"family": "t"}, loader=refuse)
    n = run_inference(ref, easy_vqa_eval["questions"], [snow[2]], out, "cpu", chunk_size=8)
    assert n == _n_q(easy_vqa_eval)
    # Finished: the folder holds this output's rows only (severity 1 was pruned).
    kept = pl.concat(
        [pl.read_parquet(f) for f in (tmp_path / "pred.parquet.chunks").glob("*.parquet")]
    )
    assert set(kept["severity"]) == {2} and kept.height == n


def test_a_killed_job_resumed_with_its_severities_changed(easy_vqa_eval, snow, tmp_path):
    out = tmp_path / "pred.parquet"
    with pytest.raises(RuntimeError, match="killed"):
        _run(easy_vqa_eval, [snow[1], snow[2]], out, Counting(fail_after=5))  # in chunk 3
    model = Counting()
    _run(easy_vqa_eval, [snow[1], snow[3]], out, model)
    assert model.answered == 2 * _n_q(easy_vqa_eval) - 16  # snow/1's two finished chunks
    fresh = tmp_path / "fresh.parquet"
    _run(easy_vqa_eval, [snow[1], snow[3]], fresh, Counting())
    assert pl.read_parquet(out).equals(pl.read_parquet(fresh))


def test_answers_of_another_device_type_are_not_reused(easy_vqa_eval, snow, tmp_path, caplog):
    """device: auto answers in bfloat16 on a GPU and in float32 on the CPU: chunks of one are
    never merged with the other's (the model here is a stand-in, so no GPU is needed)."""
    out = tmp_path / "pred.parquet"
    spec = {"family": "t", "device": "auto", "dtype": "auto"}
    with pytest.raises(RuntimeError, match="killed"):
        _run(easy_vqa_eval, [snow[1]], out, Counting(fail_after=4), device="cuda:0", spec=spec)
    model = Counting()
    with caplog.at_level("WARNING"):
        _run(easy_vqa_eval, [snow[1]], out, model, device="cpu", spec=spec)
    assert model.answered == _n_q(easy_vqa_eval)
    assert "the device type or dtype (cuda/bfloat16 -> cpu/float32)" in caplog.text
    record = json.loads(pq.read_schema(out).metadata[store.INPUTS_KEY])
    assert record["inputs"]["precision"] == {"device": "cpu", "dtype": "float32"}


class Half(Counting):
    dtype = "torch.float16"


def test_a_model_loaded_in_another_dtype_than_fingerprinted_fails(easy_vqa_eval, snow, tmp_path):
    with pytest.raises(
        RuntimeError, match="loaded in torch.float16, but its answers are fingerprinted as float32"
    ):
        _run(easy_vqa_eval, [snow[1]], tmp_path / "p.parquet", Half())
    assert not (tmp_path / "p.parquet").exists()


def test_an_edit_to_the_familys_code_discards_its_chunks(
    easy_vqa_eval, snow, tmp_path, monkeypatch, caplog
):
    """The code that computes the answers is part of what they depend on: chunks of the
    adapter as it was are not answers of the adapter as it is."""
    import vqarobust.inference as inference

    out = tmp_path / "pred.parquet"
    monkeypatch.setattr(inference, "family_code_digest", lambda family: "before")
    _run(easy_vqa_eval, [snow[1]], out, Counting())
    monkeypatch.setattr(inference, "family_code_digest", lambda family: "after")
    model = Counting()
    with caplog.at_level("INFO", logger="vqarobust"):
        _run(easy_vqa_eval, [snow[1]], out, model)
    assert model.answered == _n_q(easy_vqa_eval)
    assert "the code of the model's family" in caplog.text
    meta = json.loads(pq.read_schema(out).metadata[store.INPUTS_KEY])
    assert meta["inputs"]["code"] == "after"


def test_a_familys_code_digest_covers_its_adapter_and_nothing_of_the_others():
    import importlib
    import inspect

    from vqarobust.code_digest import code_digest, file_digest, module_files
    from vqarobust.digests import text_sha256
    from vqarobust.models import FAMILIES, family_code_digest

    for family in FAMILIES.list():
        entry = FAMILIES.entry(family)
        module = entry.tags["module"]
        # The tag names the module the family's factory imports its adapter from, or
        # the module whose function (tag job) its run_model jobs call instead.
        if "job" in entry.tags:
            assert callable(getattr(importlib.import_module(module), entry.tags["job"]))
        else:
            assert f"from {module} import" in inspect.getsource(entry.obj), family
        assert family_code_digest(family) == text_sha256(
            f"{code_digest(module)}\n{file_digest('vqarobust.inference')}\n"
        )
    files = {p.name for p in module_files("vqarobust.models.classifier")}
    assert {"classifier.py", "cnn_bow.py", "hf.py"} <= files
    assert not files & {"blip.py", "chat.py", "pnp_vqa.py", "inference.py"}
    assert family_code_digest("not-a-family") is None


def test_the_image_backend_is_part_of_a_jobs_fingerprint():
    """With and without torchvision, a checkpoint naming the plain image processor gets
    another class: chunks computed under one backend are not reused under the other."""
    from vqarobust.resume import changed_inputs, image_backend, job_fingerprint

    here = job_fingerprint("m", {"family": "blip"}, {}, "code", "questions", "cpu", 8)
    assert here["image_backend"] == image_backend()
    assert image_backend().startswith("torchvision ")  # the lock installs it
    elsewhere = {**here, "image_backend": "pil"}
    assert changed_inputs({**here, "subsets": []}, {**elsewhere, "subsets": []}) == [
        "the image backend (torchvision)"
    ]
