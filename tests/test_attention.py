import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import torch
from scipy.spatial.distance import jensenshannon

from tests.tiny_checkpoints import random_images, tiny_blip
from vqarobust import store
from vqarobust.attention import (
    NO_ATTENTION,
    attention_maps,
    attention_questions,
    attention_writer,
)
from vqarobust.metrics.attention import attention_shift_table, attention_shifts, js_divergence
from vqarobust.models import ModelRef, load_model


def test_js_divergence_hand_computed():
    # p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4);
    # KL(p||m) = 1/2 log2(2/3) + 1/2 log2(2) = 0.2075, KL(q||m) = log2(4/3) = 0.4150.
    got = js_divergence(
        np.array([[0.5, 0.5], [1, 0], [0.2, 0.8]]), np.array([[1.0, 0.0], [0, 1], [0.2, 0.8]])
    )
    expected = 0.5 * (0.5 * np.log2(2 / 3) + 0.5) + 0.5 * np.log2(4 / 3)
    assert got == pytest.approx([expected, 1.0, 0.0], abs=1e-12)
    rng = np.random.default_rng(0)
    p, q = rng.random((20, 9)), rng.random((20, 9))
    reference = [jensenshannon(a, b, base=2) ** 2 for a, b in zip(p, q, strict=True)]
    assert js_divergence(p, q) == pytest.approx(reference, abs=1e-12)
    with pytest.raises(ValueError, match="shape"):
        js_divergence(np.ones((1, 4)), np.ones((1, 5)))


def _maps(rows):
    return pl.DataFrame(
        rows,
        schema=[
            "model",
            "perturbation",
            "severity",
            "question_id",
            "image_id",
            "rows",
            "cols",
            "weights",
        ],
        orient="row",
    )


def test_shift_tables_from_maps():
    a, b = [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]
    maps = _maps(
        [
            ("m", "clean", 0, 1, 9, 2, 2, a),
            ("m", "clean", 0, 2, 9, 2, 2, b),
            ("m", "snow", 1, 1, 9, 2, 2, a),
            ("m", "snow", 1, 2, 9, 2, 2, a),
        ]
    )
    shifts = attention_shifts(maps)
    assert shifts["js_divergence"].to_list() == pytest.approx(
        [0.0, float(js_divergence(np.array(a), np.array(b)))]
    )
    table = attention_shift_table(shifts).row(0, named=True)
    assert table["n_questions"] == 2 and table["js_mean"] == pytest.approx(
        shifts["js_divergence"].mean()
    )
    # One image: every resample draws it, so the interval is the mean itself.
    assert table["js_low"] == pytest.approx(table["js_mean"]) == table["js_high"]
    bad = _maps([("m", "clean", 0, 1, 9, 2, 2, a), ("m", "snow", 1, 1, 9, 1, 4, a)])
    with pytest.raises(ValueError, match="grid of m on snow/1 question 1 is 1x4"):
        attention_shifts(bad)
    orphan = _maps([("m", "snow", 1, 1, 9, 2, 2, a)])
    with pytest.raises(ValueError, match="no clean map"):
        attention_shifts(orphan)


def test_attention_questions_are_seeded_per_question(easy_vqa_eval):
    questions = pl.from_arrow(store.read_questions(easy_vqa_eval["questions"]))
    one = attention_questions(questions, seed=3, n=10)
    two = attention_questions(questions.reverse(), seed=3, n=10)
    assert one.equals(two) and one.height == 13 and one["sample"].sum() == 3
    assert (
        attention_questions(questions, seed=4, n=10)["question_id"].to_list()
        != one["question_id"].to_list()
    )


@pytest.fixture(scope="module")
def blip_path(tmp_path_factory):
    return tiny_blip(tmp_path_factory.mktemp("blip"))


def test_vilt_attention_covers_every_patch_once(checkpoints):
    model = load_model(
        {"family": "vqa-classifier", "path_or_id": str(checkpoints["vilt"]), "device": "cpu"}
    )
    images = random_images(2, (64, 96))
    questions = ["what color is the shape?", "is there a circle?"]
    grids = model.image_attention(images, questions)
    assert len(grids) == 2
    for image, question, grid in zip(images, questions, grids, strict=True):
        assert grid.sum() == pytest.approx(1.0, abs=1e-5) and (grid > 0).all()
        # The same weights as the plain forward pass (which shuffles the patches).
        pixels = model.processor.image_processor([image], return_tensors="pt")
        text = model.processor.tokenizer([question], return_tensors="pt")
        with torch.inference_mode():
            out = model.model(**text, **pixels, output_attentions=True)
        start = text["input_ids"].shape[1] + 1
        plain = out.attentions[-1][0].mean(0)[0, start:].numpy()
        rows, cols = pixels["pixel_values"].shape[2] // 16, pixels["pixel_values"].shape[3] // 16
        assert grid.shape == (rows, cols)
        assert np.sort(grid.ravel()) == pytest.approx(np.sort(plain / plain.sum()), abs=1e-5)


def test_blip_attention_is_a_distribution_independent_of_the_batch(blip_path):
    model = load_model({"family": "blip", "path_or_id": str(blip_path), "device": "cpu"})
    images = random_images(3)
    questions = ["what color is it?", "is there a big red circle here?", "how many?"]
    batch = model.image_attention(images, questions)
    alone = model.image_attention(images[1:2], questions[1:2])[0]
    assert all(g.shape == (4, 4) and g.sum() == pytest.approx(1.0, abs=1e-5) for g in batch)
    assert batch[1] == pytest.approx(alone, abs=1e-6)


@pytest.mark.parametrize("which", ["vilt", "blip", "llava", "cnn-bow"])
def test_attention_maps_job_gives_zero_shift_on_identical_images(
    which, checkpoints, blip_path, easy_vqa_eval, tmp_path
):
    import shutil

    from tests.tiny_checkpoints import tiny_llava
    from vqarobust.materialize.images import corrupt_subset

    if which == "blip":
        path, family = blip_path, "blip"
    elif which == "llava":
        path, family = tiny_llava(tmp_path / "llava"), "llava"
    else:
        path, family = checkpoints[which], "vqa-classifier"
    copy = tmp_path / "copy"
    shutil.copytree(easy_vqa_eval["images"], copy)
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "noise", "gaussian_noise", 5)
    subsets = [
        ("clean", 0, easy_vqa_eval["images"]),
        ("copy", 1, copy),
        ("gaussian_noise", 5, tmp_path / "noise"),
    ]
    out = tmp_path / "maps.parquet"
    n = attention_maps(
        ModelRef(which, {"family": family, "path_or_id": str(path), "device": "cpu"}),
        easy_vqa_eval["questions"],
        subsets,
        out,
        n=5,
        seed=0,
    )
    maps = pl.read_parquet(out)
    assert n == maps.height
    if which == "cnn-bow":  # no attention: an empty table, said in the log
        assert n == 0 and maps.columns == store.ATTENTION_SCHEMA.names
        return
    assert n == 8 * 3  # (5 + 3 sample questions) x 3 subsets
    shifts = attention_shift_table(attention_shifts(maps))
    js = dict(zip(shifts["perturbation"], shifts["js_mean"], strict=True))
    # The same bytes: the same map, up to the order of ViLT's patch shuffle in float sums.
    assert js["copy"] == pytest.approx(0.0, abs=1e-12)
    # Tiny random-ish models attend almost uniformly, but noise does move the map.
    assert js["gaussian_noise"] > 0.0


def test_llava_attention_over_its_image_tokens(tmp_path):
    from tests.tiny_checkpoints import tiny_llava

    model = load_model(
        {"family": "llava", "path_or_id": str(tiny_llava(tmp_path / "llava")), "device": "cpu"}
    )
    images = random_images(2, (32, 32))
    questions = ["what is it?", "is there a large blue square in the corner?"]
    before = model.model.config._attn_implementation
    grids = model.image_attention(images, questions)
    n_tokens = int(
        model.processor(images=images[:1], text=model._prompts(questions[:1]), return_tensors="pt")[
            "input_ids"
        ]
        .eq(model.model.config.image_token_id)
        .sum()
    )
    side = int(round(n_tokens**0.5))
    assert all(g.shape == (side, side) and g.sum() == pytest.approx(1.0, abs=1e-5) for g in grids)
    # Left padding leaves the shorter prompt's map unchanged; the fused kernel is restored.
    alone = model.image_attention(images[:1], questions[:1])[0]
    assert grids[0] == pytest.approx(alone, abs=1e-5)
    assert model.model.config._attn_implementation == before
    assert model.answer(images, questions)  # still answers after the switch back


def test_the_answer_grid_draws_the_attention_over_each_image():
    import io

    from PIL import Image

    from vqarobust.report import figures

    def png(colour):
        buf = io.BytesIO()
        Image.new("RGB", (16, 16), colour).save(buf, format="PNG")
        return buf.getvalue()

    thumbs = pl.DataFrame(
        {"perturbation": ["clean", "snow"], "severity": [0, 1], "png": [png("red"), png("blue")]}
    )
    answers = pl.DataFrame(
        {
            "model": ["m", "m"],
            "perturbation": ["clean", "snow"],
            "severity": [0, 1],
            "answer": ["red", "blue"],
            "score": [1.0, 0.0],
        }
    )
    maps = _maps(
        [
            ("m", "clean", 0, 1, 9, 2, 2, [0.7, 0.1, 0.1, 0.1]),
            ("m", "snow", 1, 1, 9, 2, 2, [0.1, 0.1, 0.1, 0.7]),
        ]
    )
    plain = figures.answer_grid("q?", "red", thumbs, answers, {"snow": "weather"})
    over = figures.answer_grid("q?", "red", thumbs, answers, {"snow": "weather"}, maps, "m")
    drawn = [len(ax.images) for ax in over.axes if ax.images]
    assert drawn == [2, 2] and [len(ax.images) for ax in plain.axes if ax.images] == [1, 1]
    assert "attention of m" in over._suptitle.get_text()
    # The heatmap is the map at its own peak, upsampled over the image's extent.
    heat = next(ax for ax in over.axes if ax.images).images[1]
    assert heat.get_array().max() == pytest.approx(1.0) and heat.get_extent()[1] == 15.5


def test_vilt_depends_on_the_item_alone_not_on_the_random_state(checkpoints):
    """ViLT draws its patches from a generator seeded by the image: the maps and the answers
    are bit-identical whatever the process drew before, the global generator is left as it
    was (a resumed job equals an uninterrupted one), and an image's answer does not depend
    on the padding that a larger image in its batch gives it."""
    model = load_model(
        {"family": "vqa-classifier", "path_or_id": str(checkpoints["vilt"]), "device": "cpu"}
    )
    images = [*random_images(1, (64, 96)), *random_images(1, (96, 64))]
    questions = ["what color is the shape?", "is there a circle?"]
    runs = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        torch.rand(7)
        state = torch.get_rng_state()
        runs.append((model.image_attention(images, questions), model.answer(images, questions)))
        assert torch.equal(torch.get_rng_state(), state)  # nothing drawn from it
    (maps_a, answers_a), (maps_b, answers_b) = runs
    assert all(np.array_equal(a, b) for a, b in zip(maps_a, maps_b, strict=True))
    assert answers_a == answers_b
    assert model.answer(images[:1], questions[:1]) == answers_a[:1]
    # Nor does its map depend on the batch (a model's job keeps maps without its size).
    assert model.image_attention(images[1:], questions[1:])[0] == pytest.approx(maps_a[1], abs=1e-5)


@pytest.mark.parametrize("which", ["vilt", "cnn-bow"])
def test_a_model_job_draws_its_maps_with_its_one_load_and_keeps_them_by_content(
    which, checkpoints, easy_vqa_eval, tmp_path
):
    """A per-model run_model job draws the attention maps with the weights its answers
    loaded: one load, the same maps as an attention job of its own. Its maps are kept per
    subset by content: a rerun with everything kept loads nothing; one with a subset added
    draws that subset's alone; another n draws them all again."""
    from vqarobust.inference import Subset, run_model_job
    from vqarobust.materialize.images import corrupt_subset
    from vqarobust.models import load_model

    loads: list[str] = []

    def counted(*args, **kwargs):
        loads.append(which)
        return load_model(*args, **kwargs)

    spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints[which]), "device": "cpu"}
    clean = easy_vqa_eval["images"]
    corrupt_subset(clean, tmp_path / "noise", "gaussian_noise", 5)
    corrupt_subset(clean, tmp_path / "blur", "defocus_blur", 3)
    folders = {("clean", 0): clean, ("gaussian_noise", 5): tmp_path / "noise"}
    out, maps = tmp_path / "clean.parquet", tmp_path / "maps.parquet"

    def job(pairs: dict, n: int = 5) -> pl.DataFrame:
        loads.clear()
        params = {"n": n, "seed": 0, "subsets": [list(pair) for pair in pairs]}
        draw = attention_writer(
            which, easy_vqa_eval["questions"], params, list(pairs.values()), maps
        )
        ref = ModelRef(which, spec, loader=counted)
        sets = [Subset("clean", 0, str(clean))]
        run_model_job(ref, easy_vqa_eval["questions"], [(sets, out)], "cpu", then=draw)
        return pl.read_parquet(maps)

    first = job(folders)
    assert loads == [which]  # answers and maps from one load
    alone = tmp_path / "alone.parquet"
    subsets = [(p, s, f) for (p, s), f in folders.items()]
    attention_maps(ModelRef(which, spec), easy_vqa_eval["questions"], subsets, alone, n=5)
    assert first.equals(pl.read_parquet(alone))
    assert first.height == (0 if which == "cnn-bow" else 8 * 2)
    assert not pq.read_schema(maps).metadata  # drawn: no family-without-attention mark
    assert job(folders).equals(first) and loads == []  # answers and maps kept
    more = job({**folders, ("defocus_blur", 3): tmp_path / "blur"})
    assert loads == [which] and more.head(first.height).equals(first)
    if which == "vilt":
        assert set(more["perturbation"]) == {"clean", "gaussian_noise", "defocus_blur"}
        files = sorted((tmp_path / "maps.parquet.chunks").glob("*.parquet"))
        assert len(files) == 3
    fewer = job(folders, n=2)
    assert loads == [which] and fewer.height == (0 if which == "cnn-bow" else 5 * 2)
    # The folder keeps the maps of the last job's subsets only.
    assert len(list((tmp_path / "maps.parquet.chunks").glob("*.parquet"))) == 2


def test_a_model_without_attention_gets_the_empty_table_without_a_load(easy_vqa_eval, tmp_path):

    out = tmp_path / "maps.parquet"
    draw = attention_writer("chat", easy_vqa_eval["questions"], None, [], out)
    assert draw(None) == 0
    assert pl.read_parquet(out).columns == store.ATTENTION_SCHEMA.names
    # Marked, so that a cloud plan does not count it as an image_attention job's output.
    assert pq.read_schema(out).metadata == NO_ATTENTION
    with pytest.raises(ValueError, match="2 attention subsets but 1 image folders"):
        attention_writer(
            "m", "q", {"n": 1, "seed": 0, "subsets": [["clean", 0], ["snow", 1]]}, ["a"], out
        )


def test_maps_that_run_out_of_memory_are_drawn_in_halved_batches(easy_vqa_eval):
    """As answering does: a batch that runs out of memory is halved and drawn again, the
    same maps in the same order; at batch size 1 the error is raised."""
    from vqarobust.attention import attention_table
    from vqarobust.models.base import VQAModel

    class Tight(VQAModel):
        def __init__(self, fits: int) -> None:
            super().__init__(batch_size=8)
            self.fits, self.calls = fits, []

        def answer(self, images: list, questions: list[str]) -> list[str]:
            return ["x"] * len(questions)

        def image_attention(self, images: list, questions: list[str]) -> list[np.ndarray]:
            self.calls.append(len(questions))
            if len(questions) > self.fits:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return [np.full((2, 2), len(q) / 4.0) for q in questions]

    subsets = [("clean", 0, easy_vqa_eval["images"])]
    model = Tight(fits=3)
    table = attention_table(model, "m", easy_vqa_eval["questions"], subsets, n=5)
    assert model.calls == [8, 4, 2, 2, 2, 2] and model.batch_size == 2
    ample = attention_table(Tight(fits=8), "m", easy_vqa_eval["questions"], subsets, n=5)
    assert table.num_rows == 8 and table.equals(ample)
    with pytest.raises(RuntimeError, match="out of memory"):
        attention_table(Tight(fits=0), "m", easy_vqa_eval["questions"], subsets, n=5)
