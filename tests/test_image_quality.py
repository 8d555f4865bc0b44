import math
import warnings

import numpy as np
import polars as pl
import pytest
from skimage.metrics import structural_similarity

from vqarobust import store
from vqarobust.corruptions.quality import ssim_psnr
from vqarobust.materialize.images import corrupt_subset
from vqarobust.metrics.image_quality import quality_correlation, quality_table, read_quality
from vqarobust.store import ImageStorage


def _image(seed: int, size: int = 32) -> np.ndarray:
    return np.random.default_rng(seed).integers(20, 230, (size, size, 3), dtype=np.uint8)


def test_psnr_hand_computed_and_identical_images():
    a = _image(0)
    # Every pixel off by 5: MSE 25 -> PSNR = 10 log10(255^2 / 25) = 34.151 dB.
    ssim, psnr = ssim_psnr(a, a + 5)
    assert psnr == pytest.approx(10 * math.log10(255**2 / 25))
    assert 0 < ssim < 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no divide-by-zero warning for a zero MSE
        assert ssim_psnr(a, a.copy()) == (1.0, math.inf)


def _wang_ssim(x: np.ndarray, y: np.ndarray) -> float:
    """Wang et al. 2004's SSIM written out window by window: at every pixel whose 11x11
    window fits, the Gaussian-weighted (sigma 1.5, weights summing to 1) means, variances
    and covariance of that window, their SSIM with C1 = (0.01 * 255)^2 and
    C2 = (0.03 * 255)^2; the mean over those pixels, then over the channels."""
    from numpy.lib.stride_tricks import sliding_window_view

    g = np.exp(-(np.arange(-5, 6) ** 2) / (2 * 1.5**2))
    w = np.outer(g, g) / np.outer(g, g).sum()
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    scores = []
    for c in range(x.shape[2]):
        a = sliding_window_view(x[..., c].astype(np.float64), (11, 11))
        b = sliding_window_view(y[..., c].astype(np.float64), (11, 11))
        ma, mb = (a * w).sum((-2, -1)), (b * w).sum((-2, -1))
        da, db = a - ma[..., None, None], b - mb[..., None, None]
        va, vb, cov = (
            (da * da * w).sum((-2, -1)),
            (db * db * w).sum((-2, -1)),
            (da * db * w).sum((-2, -1)),
        )
        s = ((2 * ma * mb + c1) * (2 * cov + c2)) / ((ma**2 + mb**2 + c1) * (va + vb + c2))
        scores.append(s.mean())
    return float(np.mean(scores))


def test_ssim_is_wang_et_als_formula_by_default():
    """The default window is Wang et al.'s: the formula written out in numpy, and
    scikit-image's structural_similarity with gaussian_weights=True, sigma=1.5,
    use_sample_covariance=False, on a small image and a noisy copy."""
    a = _image(7, 16)
    b = np.clip(a.astype(int) + np.random.default_rng(8).normal(0, 25, a.shape), 0, 255)
    b = b.astype(np.uint8)
    ssim, _ = ssim_psnr(a, b)
    assert ssim == pytest.approx(_wang_ssim(a, b), abs=1e-6)
    assert ssim == pytest.approx(
        structural_similarity(
            a,
            b,
            channel_axis=2,
            data_range=255,
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
        ),
        abs=1e-6,
    )
    # The uniform window is another score of the same pair.
    assert abs(ssim_psnr(a, b, "uniform")[0] - ssim) > 1e-3
    assert ssim_psnr(a, a.copy()) == (1.0, math.inf)


def test_ssim_and_psnr_equal_scikit_image():
    from skimage.metrics import peak_signal_noise_ratio

    from vqarobust.corruptions import corrupt

    a, b = _image(1), _image(2)
    photo = _image(4, 48)
    pairs = [
        (a, b),
        (a, np.clip(a.astype(int) + _image(3) // 8, 0, 255).astype(np.uint8)),
        (_image(5, 11), _image(6, 11)),
    ]
    for name in ("gaussian_noise", "defocus_blur", "brightness", "pixelate"):
        pairs.append((photo, corrupt(photo, name, 3, seed=1)))
    gaussian = {"gaussian_weights": True, "sigma": 1.5, "use_sample_covariance": False}
    for window, options in (("gaussian", gaussian), ("uniform", {})):
        for clean, other in pairs:
            ssim, psnr = ssim_psnr(clean, other, window)
            want = structural_similarity(clean, other, channel_axis=2, data_range=255, **options)
            assert ssim == pytest.approx(want, abs=1e-6)
            # and the mean of its per-channel scores, as scikit-image defines channel_axis
            per_channel = [
                structural_similarity(clean[..., c], other[..., c], data_range=255, **options)
                for c in range(3)
            ]
            assert ssim == pytest.approx(np.mean(per_channel), abs=1e-6)
            assert psnr == pytest.approx(peak_signal_noise_ratio(clean, other, data_range=255))


def test_shapes_must_match_and_hold_a_window():
    with pytest.raises(ValueError, match="differ"):
        ssim_psnr(_image(0, 32), _image(0, 40))
    with pytest.raises(ValueError, match="at least 11x11"):
        ssim_psnr(_image(0, 10), _image(1, 10))
    with pytest.raises(ValueError, match="at least 7x7"):
        ssim_psnr(_image(0, 6), _image(1, 6), "uniform")
    assert ssim_psnr(_image(0, 8), _image(1, 8), "uniform")[0] < 1
    with pytest.raises(ValueError, match="window must be one of"):
        ssim_psnr(_image(0, 32), _image(1, 32), "box")


def test_quality_table_hand_computed():
    per_image = pl.DataFrame(
        {
            "perturbation": ["snow"] * 3 + ["blur"] * 2,
            "severity": [1, 1, 1, 2, 2],
            "image_id": [1, 2, 3, 1, 2],
            "ssim": [0.9, 0.8, 1.0, 0.5, 0.7],
            "psnr": [30.0, 20.0, math.inf, 10.0, 14.0],
        }
    )
    t = {r["perturbation"]: r for r in quality_table(per_image).iter_rows(named=True)}
    assert t["snow"]["n_images"] == 3 and t["snow"]["n_identical"] == 1
    assert t["snow"]["ssim_mean"] == pytest.approx(0.9)
    assert t["snow"]["ssim_std"] == pytest.approx(0.1)  # sample deviation of .9, .8, 1
    # The identical image (PSNR inf) is left out of the PSNR mean: (30 + 20) / 2.
    assert t["snow"]["psnr_mean"] == pytest.approx(25.0)
    assert t["snow"]["psnr_std"] == pytest.approx(math.sqrt(50))
    assert t["blur"]["psnr_mean"] == pytest.approx(12.0) and t["blur"]["n_identical"] == 0
    # Each mean's interval over the images (two or three here): around the mean, within
    # the range of the values; PSNR's over the finite ones only.
    assert 0.8 <= t["snow"]["ssim_low"] <= 0.9 <= t["snow"]["ssim_high"] <= 1.0
    assert 20.0 <= t["snow"]["psnr_low"] <= 25.0 <= t["snow"]["psnr_high"] <= 30.0
    assert 0.5 <= t["blur"]["ssim_low"] <= 0.6 <= t["blur"]["ssim_high"] <= 0.7


def test_rank_correlation_per_model():
    quality = pl.DataFrame(
        {
            "perturbation": ["a", "a", "b", "b"],
            "severity": [1, 2, 1, 2],
            "ssim_mean": [0.9, 0.5, 0.8, 0.3],
        }
    )
    acc = pl.DataFrame(
        {
            "model": ["m"] * 4 + ["flat"] * 4 + ["m"],
            "modality": ["image"] * 8 + ["clean"],
            "perturbation": ["a", "a", "b", "b"] * 2 + ["clean"],
            "severity": [1, 2, 1, 2] * 2 + [0],
            "accuracy": [0.7, 0.4, 0.6, 0.2, 0.5, 0.5, 0.5, 0.5, 0.9],
        }
    )
    got = {r["model"]: r for r in quality_correlation(quality, acc).iter_rows(named=True)}
    # m: the SSIM order 0.9 > 0.8 > 0.5 > 0.3 is its accuracy order: rho = 1.
    assert got["m"]["n_subsets"] == 4 and got["m"]["spearman"] == pytest.approx(1.0)
    # flat: a constant accuracy has no rank order: null, not NaN.
    assert got["flat"]["spearman"] is None
    only_a = quality_correlation(quality, acc, ["a"])
    assert only_a["n_subsets"].to_list() == [2, 2] and only_a["spearman"].is_null().all()


def test_corrupted_shards_carry_the_quality_of_the_stored_image(easy_vqa_eval, tmp_path):
    clean = {
        r["image_id"]: store.decode_image(r["bytes"])
        for r in store.iter_images(easy_vqa_eval["images"])
    }
    for name, severity, fmt in (
        ("gaussian_noise", 3, "png"),
        ("jpeg_compression", 5, "png"),
        ("brightness", 2, "jpeg"),
    ):
        out = tmp_path / f"{name}-{fmt}"
        corrupt_subset(easy_vqa_eval["images"], out, name, severity, storage=ImageStorage(fmt))
        rows = list(store.iter_images(out))
        assert len(rows) == len(clean)
        for row in rows:
            stored = store.decode_image(row["bytes"])
            ssim, psnr = ssim_psnr(clean[row["image_id"]], stored)
            assert row["ssim"] == pytest.approx(ssim, abs=1e-12)
            assert row["psnr"] == pytest.approx(psnr, abs=1e-9)
        frame = read_quality([("clean", 0, easy_vqa_eval["images"]), (name, severity, out)])
        assert frame.height == len(clean) and set(frame["perturbation"]) == {name}
    # Clean shards hold no scores; a subset written without them is named in a warning.
    assert store.read_image_quality(easy_vqa_eval["images"]) is None
    with pytest.warns(UserWarning, match="no image quality scores in 1 image subsets.*snow/1"):
        empty = read_quality([("snow", 1, easy_vqa_eval["images"])])
    assert empty.height == 0 and empty.columns == [
        "perturbation",
        "severity",
        "image_id",
        "ssim",
        "psnr",
    ]


def test_more_severe_noise_lowers_ssim(easy_vqa_eval, tmp_path):
    means = []
    for severity in (1, 3, 5):
        corrupt_subset(
            easy_vqa_eval["images"], tmp_path / str(severity), "gaussian_noise", severity
        )
        frame = read_quality([("gaussian_noise", severity, tmp_path / str(severity))])
        means.append(frame["ssim"].mean())
    assert means[0] > means[1] > means[2]


def test_database_and_report_carry_the_calibration(easy_vqa_eval, tmp_path):
    import duckdb
    from scipy.stats import spearmanr

    from tests.predictions import write_predictions
    from vqarobust.db import DatabaseInputs, build_database
    from vqarobust.report import render_report

    questions = store.read_questions(easy_vqa_eval["questions"]).to_pylist()
    paths = [write_predictions(tmp_path, questions, "m", "clean", [0], lambda s: 0.9)]
    subsets = [("clean", 0, str(easy_vqa_eval["images"]))]
    for name in ("gaussian_noise", "contrast"):
        paths.append(
            write_predictions(tmp_path, questions, "m", name, [1, 2, 3], lambda s: 0.9 - 0.2 * s)
        )
        for s in (1, 2, 3):
            corrupt_subset(easy_vqa_eval["images"], tmp_path / f"{name}{s}", name, s)
            subsets.append((name, s, str(tmp_path / f"{name}{s}")))
    db = tmp_path / "r.duckdb"
    build_database(
        db,
        DatabaseInputs(easy_vqa_eval["questions"], paths, image_subsets=subsets),
        families={"gaussian_noise": "noise", "contrast": "digital"},
    )
    with duckdb.connect(str(db), read_only=True) as con:
        per_image = con.sql("SELECT * FROM image_quality_images").pl()
        table = con.sql("SELECT * FROM image_quality ORDER BY ALL").pl()
        corr = con.sql("SELECT * FROM image_quality_correlation").pl()
        acc = con.sql("SELECT * FROM accuracy WHERE modality = 'image' ORDER BY ALL").pl()
    assert per_image.height == 6 * 6 and table.height == 6
    # Recomputed from the per-image rows a reader can export.
    assert table.equals(quality_table(per_image).sort("perturbation", "severity"))
    joined = acc.join(table, on=["perturbation", "severity"])
    rho = spearmanr(joined["ssim_mean"], joined["accuracy"]).statistic
    assert corr["n_subsets"][0] == 6 and corr["spearman"][0] == pytest.approx(rho)
    out = render_report(db, tmp_path / "report" / "index.html")
    text = out.read_text()
    assert "Severity calibration" in text and "Mean SSIM per corruption and severity" in text
    assert (tmp_path / "report" / "figures" / "image_quality.png").stat().st_size > 5000
    csv = pl.read_csv(tmp_path / "report" / "tables" / "image_quality.csv")
    assert csv.height == 6
