"""Image features kept across a job's chunks by the image's content
(vqarobust.models.feature_memory)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from vqarobust.models.base import SharesImageFeatures
from vqarobust.models.feature_memory import FeatureMemory, content_key, nbytes


def _image(value: int, size: tuple[int, int] = (4, 4), mode: str = "RGB") -> Image.Image:
    return Image.new(mode, size, value if mode == "L" else (value, value, value))


def test_equal_pixels_share_a_key_and_mode_size_or_pixels_part_them():
    assert content_key(_image(7)) == content_key(_image(7))
    assert content_key(_image(7)) != content_key(_image(8))
    assert content_key(_image(7)) != content_key(_image(7, size=(2, 8)))  # same bytes
    assert content_key(_image(7, mode="L")) != content_key(_image(7))


def test_nbytes_counts_whole_storages_of_nested_tensors():
    row = torch.zeros(10, 4)[0]  # a row keeps its batch's 160 bytes alive
    assert nbytes(row) == 160
    assert nbytes({"a": torch.zeros(2, dtype=torch.float64), "b": (torch.zeros(3),)}) == 16 + 12
    assert nbytes([np.zeros(5, dtype=np.uint8)]) == 5
    assert nbytes("no tensor") == 0


def test_features_are_kept_when_encoded_a_second_time_while_the_budget_lasts():
    """Budget 100 bytes, items of 40: a first offer only remembers the key, a second keeps
    the features; a third item's 40 bytes would pass 100, so it is not kept, and nothing
    kept is dropped."""
    memory = FeatureMemory(budget=100)
    a, b, c = (torch.zeros(10) for _ in range(3))  # 40 bytes each
    memory.offer(("f", b"a"), a)
    assert memory.get(("f", b"a")) is None and memory.used == 0
    for key, features in ((b"a", a), (b"b", b), (b"c", c)):
        memory.offer(("f", key), features)
        memory.offer(("f", key), features)
    assert memory.get(("f", b"a")) is a and memory.get(("f", b"b")) is b
    assert memory.get(("f", b"c")) is None
    assert memory.used == 80 and len(memory) == 2
    assert memory.get(("g", b"a")) is None  # another encoder's key


class Encoding(SharesImageFeatures):
    """Answers with each image's encoding, counting the images it encodes."""

    def __init__(self, keeps: bool, bound: bool = True) -> None:
        super().__init__(batch_size=2)
        self.keeps_features, self.bound, self.encoded = keeps, bound, 0

    def encode(self, images):
        self.encoded += len(images)
        return [str(im.getpixel((0, 0))) for im in images]

    def answer(self, images, questions):
        encode = self.encode if self.bound else lambda ims: self.encode(ims)
        return self.image_features(images, encode)


@pytest.mark.parametrize(
    ("keeps", "bound", "encoded"),
    [(True, True, 4), (False, True, 6), (True, False, 6)],
)
def test_only_an_adapter_that_keeps_features_keeps_them_for_a_bound_encoder(keeps, bound, encoded):
    """Three calls about the same two images (new objects each time, same pixels): kept
    from the second encoding on, 2 + 2 encodes; otherwise 2 a call. A lambda encoder is
    no method of the adapter's, so nothing says which weights it reads: not kept."""
    model = Encoding(keeps, bound)
    for _ in range(3):
        images = [_image(1), _image(2)]
        assert model.answer_all(images, ["q", "q"]) == ["(1, 1, 1)", "(2, 2, 2)"]
    assert model.encoded == encoded


@pytest.mark.parametrize("key", ["vilt", "cnn-bow"])
def test_a_job_encodes_each_clean_image_once_across_question_subsets(
    checkpoints, easy_vqa_eval, tmp_path, key
):
    """Three question subsets ask about the same clean images in chunks of 8: each
    distinct image is encoded twice in the job (the second time its features are kept),
    not once per subset, and the answers equal a run that keeps nothing."""
    import polars as pl

    from tests.counting_models import count_image_encodes
    from vqarobust import store
    from vqarobust.inference import Subset, run_model_job
    from vqarobust.materialize.questions import perturb_question_set
    from vqarobust.models import ModelRef, load_model

    paths = {severity: tmp_path / f"keyboard-{severity}.parquet" for severity in (1, 2, 3)}
    perturb_question_set(easy_vqa_eval["questions"], paths, "keyboard")
    images = str(easy_vqa_eval["images"])
    sets = [Subset("keyboard", s, images, "text", str(path)) for s, path in paths.items()]
    spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints[key])}
    encoded: list[int] = []

    def counting(budget: int):
        def load(*args, **kwargs):
            model = load_model(*args, **kwargs)
            model._memory.budget = budget
            count_image_encodes(model, encoded)
            return model

        return load

    outs = {}
    for budget in (256 * 2**20, 0):
        encoded.clear()
        out = tmp_path / f"pred-{budget}.parquet"
        ref = ModelRef(key, spec, loader=counting(budget))
        run_model_job(ref, easy_vqa_eval["questions"], [(sets, out)], "cpu", chunk_size=8)
        outs[budget] = (pl.read_parquet(out).sort("severity", "question_id"), sum(encoded))
    asked = store.read_questions(easy_vqa_eval["questions"]).sort_by(
        [("image_id", "ascending"), ("question_id", "ascending")]
    )
    ids = asked.column("image_id").to_pylist()
    per_chunk = sum(len(set(ids[k : k + 8])) for k in range(0, len(ids), 8))
    kept, none = outs[256 * 2**20], outs[0]
    assert kept[1] == 2 * len(set(ids))
    assert none[1] == 3 * per_chunk  # each chunk encodes its images again
    assert kept[0]["answer"].to_list() == none[0]["answer"].to_list()
