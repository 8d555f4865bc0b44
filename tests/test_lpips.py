"""LPIPS (vqarobust.corruptions.lpips) on a random-init AlexNet and random linear layers
saved in the layouts users give (torchvision's state dict, the lpips package's v0.1
file), against the formula computed here independently with torch's functional ops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from vqarobust.corruptions.lpips import CHANNELS, alexnet_features, load_lpips


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    root = tmp_path_factory.mktemp("lpips")
    torch.manual_seed(0)
    features = alexnet_features()
    # torchvision's layout: the whole model's state dict, classifier included.
    state = {f"features.{k}": v for k, v in features.state_dict().items()}
    state["classifier.1.weight"] = torch.zeros(4, 9216)
    torch.save(state, root / "alexnet.pth")
    linear = {f"lin{i}.model.1.weight": torch.rand(1, c, 1, 1) for i, c in enumerate(CHANNELS)}
    torch.save(linear, root / "alex.pth")
    return root / "alexnet.pth", root / "alex.pth", state, linear


def _by_hand(state, linear, a: np.ndarray, b: np.ndarray) -> float:
    """LPIPS as Zhang et al.'s v0.1 defines it, one pair, from the raw tensors."""

    def taps(img):
        x = torch.from_numpy(img).permute(2, 0, 1)[None].float() / 127.5 - 1
        x = (x - torch.tensor([-0.030, -0.088, -0.188]).view(1, 3, 1, 1)) / torch.tensor(
            [0.458, 0.448, 0.450]
        ).view(1, 3, 1, 1)
        out = []
        for idx, (stride, pad, pool) in zip(
            (0, 3, 6, 8, 10),
            ((4, 2, True), (1, 2, True), (1, 1, False), (1, 1, False), (1, 1, False)),
            strict=True,
        ):
            x = F.relu(
                F.conv2d(
                    x,
                    state[f"features.{idx}.weight"],
                    state[f"features.{idx}.bias"],
                    stride=stride,
                    padding=pad,
                )
            )
            out.append(x)
            if pool:
                x = F.max_pool2d(x, 3, 2)
        return out

    total = 0.0
    for i, (fa, fb) in enumerate(zip(taps(a), taps(b), strict=True)):
        na = fa / (fa.pow(2).sum(1, keepdim=True).sqrt() + 1e-10)
        nb = fb / (fb.pow(2).sum(1, keepdim=True).sqrt() + 1e-10)
        total += float(F.conv2d((na - nb) ** 2, linear[f"lin{i}.model.1.weight"]).mean())
    return total


def test_lpips_is_the_formula_computed_independently(weights):
    backbone, lin, state, linear = weights
    metric = load_lpips(backbone, lin)
    rng = np.random.default_rng(0)
    clean = rng.integers(0, 256, size=(3, 72, 80, 3), dtype=np.uint8)
    noisy = np.clip(clean + rng.normal(0, 40, clean.shape), 0, 255).astype(np.uint8)
    got = metric.distance(clean, noisy)
    want = [_by_hand(state, linear, clean[i], noisy[i]) for i in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert metric.distance(clean, clean) == pytest.approx([0.0] * 3, abs=1e-9)
    np.testing.assert_allclose(metric.distance(noisy, clean), got, rtol=1e-5)  # symmetric
    # More noise, farther (on average over the batch, with random weights).
    noisier = np.clip(clean + rng.normal(0, 90, clean.shape), 0, 255).astype(np.uint8)
    assert metric.distance(clean, noisier).mean() > got.mean()


def test_bad_weight_files_are_errors_naming_them(weights, tmp_path):
    backbone, lin, state, linear = weights
    with pytest.raises(FileNotFoundError, match="nope.pth does not exist"):
        load_lpips(tmp_path / "nope.pth", lin)
    torch.save({"conv.weight": torch.zeros(1)}, tmp_path / "other.pth")
    with pytest.raises(ValueError, match="other.pth: not AlexNet's convolutional weights"):
        load_lpips(tmp_path / "other.pth", lin)
    with pytest.raises(ValueError, match=r"other.pth: no lin0.model.1.weight"):
        load_lpips(backbone, tmp_path / "other.pth")
    torch.save({**linear, "lin2.model.1.weight": torch.zeros(1, 3, 1, 1)}, tmp_path / "bad.pth")
    with pytest.raises(ValueError, match=r"lin2.model.1.weight has shape \(1, 3, 1, 1\)"):
        load_lpips(backbone, tmp_path / "bad.pth")
    # The features' own state dict (no "features." prefix) loads too.
    bare = {k.removeprefix("features."): v for k, v in state.items() if k.startswith("features.")}
    torch.save(bare, tmp_path / "bare.pth")
    zeros = np.zeros((1, 64, 64, 3), np.uint8)
    assert load_lpips(tmp_path / "bare.pth", lin).distance(zeros, zeros)[0] == 0.0


def test_lpips_of_a_corrupted_subset_reaches_the_database_and_report(
    weights, easy_vqa_eval, tmp_path
):
    """score_lpips on easy-VQA shards: one row per image, equal to the metric on the
    stored images; the image_quality analysis adds each image's LPIPS and the means with
    intervals; the report shows them."""
    import duckdb
    import polars as pl

    from tests.predictions import write_predictions
    from vqarobust import store
    from vqarobust.db import DatabaseInputs, build_database
    from vqarobust.materialize.images import corrupt_subset, score_lpips
    from vqarobust.metrics.image_quality import quality_table
    from vqarobust.report import render_report

    backbone, lin, *_ = weights
    metric = load_lpips(backbone, lin)
    clean = {
        r["image_id"]: store.decode_image(r["bytes"])
        for r in store.iter_images(easy_vqa_eval["images"])
    }
    questions = store.read_questions(easy_vqa_eval["questions"]).to_pylist()
    paths = [write_predictions(tmp_path, questions, "m", "clean", [0], lambda s: 0.9)]
    subsets, lpips_paths, means = [("clean", 0, str(easy_vqa_eval["images"]))], [], []
    paths.append(
        write_predictions(
            tmp_path, questions, "m", "gaussian_noise", [1, 5], lambda s: 0.9 - 0.1 * s
        )
    )
    for s in (1, 5):
        folder = tmp_path / f"noise{s}"
        corrupt_subset(easy_vqa_eval["images"], folder, "gaussian_noise", s)
        out = tmp_path / f"lpips{s}.parquet"
        assert score_lpips(
            easy_vqa_eval["images"], folder, out, "gaussian_noise", s, backbone, lin
        ) == len(clean)
        table = pl.read_parquet(out)
        assert table["image_id"].to_list() == sorted(clean)
        for row in store.iter_images(folder):
            stored = store.decode_image(row["bytes"])[None]
            want = metric.distance(clean[row["image_id"]][None], stored)[0]
            got = table.filter(image_id=row["image_id"])["lpips"][0]
            assert got == pytest.approx(want, rel=1e-5)
        means.append(table["lpips"].mean())
        subsets.append(("gaussian_noise", s, str(folder)))
        lpips_paths.append(out)
    db = tmp_path / "r.duckdb"
    build_database(
        db,
        DatabaseInputs(
            easy_vqa_eval["questions"], paths, image_subsets=subsets, lpips_paths=lpips_paths
        ),
        families={"gaussian_noise": "noise"},
    )
    with duckdb.connect(str(db), read_only=True) as con:
        per_image = con.sql("SELECT * FROM image_quality_images").pl()
        quality = con.sql("SELECT * FROM image_quality ORDER BY severity").pl()
    assert per_image["lpips"].null_count() == 0 and per_image.height == 2 * len(clean)
    assert quality["lpips_mean"].to_list() == pytest.approx(means)
    assert (quality["lpips_low"] <= quality["lpips_mean"]).all()
    # Recomputed from the per-image rows a reader can export.
    assert quality.equals(quality_table(per_image).sort("perturbation", "severity"))
    text = render_report(db, tmp_path / "report" / "index.html").read_text()
    assert "lpips_mean" in text
    # A scored subset's image without LPIPS is an error, not a silent gap.
    short = pl.read_parquet(lpips_paths[0]).head(2)
    short.write_parquet(tmp_path / "short.parquet")
    from vqarobust.metrics.image_quality import read_quality, with_lpips

    images = read_quality(subsets)
    with pytest.raises(ValueError, match="images of LPIPS-scored subsets have no LPIPS"):
        with_lpips(images, [tmp_path / "short.parquet", lpips_paths[1]])


def test_lpips_config_needs_both_files(tmp_path, monkeypatch):
    """Both files, and (missing_weights: fail) present at validation; with skip, LPIPS
    is off while one is absent."""
    import yaml

    from tests.conftest import REPO
    from vqarobust.config import ConfigError, validate_config

    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "alexnet.pth").write_bytes(b"x")
    with pytest.raises(ConfigError, match="lpips.linear: LPIPS needs both"):
        validate_config({**base, "lpips": {"backbone": "alexnet.pth"}})
    with pytest.raises(ConfigError, match="lpips.linear: no file alex.pth"):
        validate_config({**base, "lpips": {"backbone": "alexnet.pth", "linear": "alex.pth"}})
    with pytest.raises(ConfigError, match="lpips"):
        validate_config({**base, "lpips": {"backbone": "alexnet.pth", "weights": "a"}})
    # With missing_weights: skip, an absent file turns LPIPS off, said at start with
    # where the file comes from; the study runs without score_lpips jobs.
    from vqarobust.plan import StudyPlan

    lpips = {"backbone": "alexnet.pth", "linear": "alex.pth"}
    plan = StudyPlan.build(validate_config({**base, "missing_weights": "skip", "lpips": lpips}))
    assert not plan.corrupt.lpips and plan.corrupt.lpips_files(None) == []
    assert (
        "Skipping LPIPS (missing_weights: skip): lpips.linear: no file alex.pth (the "
        "lpips wheel's lpips/weights/v0.1/alex.pth"
    ) in "\n".join(plan.skipped_messages())
    (tmp_path / "alex.pth").write_bytes(b"x")
    plan = StudyPlan.build(validate_config({**base, "missing_weights": "skip", "lpips": lpips}))
    assert plan.corrupt.lpips and plan.skipped_lpips is None


# lpips 0.1.4 builds its AlexNet with torchvision's deprecated ``pretrained`` argument.
@pytest.mark.filterwarnings("ignore:The parameter 'pretrained' is deprecated:UserWarning")
@pytest.mark.filterwarnings("ignore:Arguments other than a weight enum:UserWarning")
def test_lpips_equals_the_lpips_package_with_its_shipped_linear_layers(tmp_path):
    """The ``lpips`` package's own v0.1 AlexNet metric, on a random backbone (its
    pretrained one would download) and the linear layers its wheel ships: this module,
    given the same backbone in torchvision's layout and the wheel's ``alex.pth``, gives
    the package's distances."""
    from pathlib import Path

    import lpips

    torch.manual_seed(0)
    reference = lpips.LPIPS(net="alex", pnet_rand=True, verbose=False).eval()
    # "net.slice1.0.weight" is torchvision's "features.0.weight".
    state = {
        f"features.{k.split('.', 2)[2]}": v
        for k, v in reference.state_dict().items()
        if k.startswith("net.")
    }
    torch.save(state, tmp_path / "alexnet.pth")
    shipped = Path(lpips.__file__).parent / "weights" / "v0.1" / "alex.pth"
    metric = load_lpips(tmp_path / "alexnet.pth", shipped)
    rng = np.random.default_rng(1)
    clean = rng.integers(0, 256, size=(4, 64, 96, 3), dtype=np.uint8)
    noisy = np.clip(clean + rng.normal(0, 30, clean.shape), 0, 255).astype(np.uint8)

    def scaled(images):
        return torch.tensor(images, dtype=torch.float32).permute(0, 3, 1, 2) / 127.5 - 1

    with torch.no_grad():
        want = reference(scaled(clean), scaled(noisy)).flatten().double().numpy()
    np.testing.assert_allclose(metric.distance(clean, noisy), want, rtol=1e-5)
    assert len(set(np.round(want, 6))) == 4
