"""Stylize (AdaIN) on tiny random weights in the public checkpoint layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.tiny_checkpoints import style_images, tiny_adain
from vqarobust.corruptions import corrupt, corrupt_item
from vqarobust.corruptions.samples import photo_like
from vqarobust.corruptions.stylize import (
    AdaIN,
    AdaINWeightsError,
    Stylizer,
    adaptive_instance_norm,
)


@pytest.fixture(scope="module")
def stylizer(tmp_path_factory):
    root = tmp_path_factory.mktemp("adain")
    return Stylizer(tiny_adain(root / "weights"), style_images(root / "styles"), device="cpu")


def test_public_layout_loads_every_tensor(tmp_path):
    folder = tiny_adain(tmp_path / "w")
    model = AdaIN.from_files(folder)
    assert len(model.encoder) == 10 and len(model.decoder) == 9
    vgg = torch.load(folder / "vgg_normalised.pth", weights_only=True)
    # Encoder tensors are the file's, in order (nothing re-initialised).
    assert torch.equal(model.encoder[-1][0], vgg["29.weight"])
    dec = torch.load(folder / "decoder.pth", weights_only=True)
    assert torch.equal(model.decoder[0][0], dec["1.weight"])


def test_bad_weight_files_are_named(tmp_path):
    folder = tiny_adain(tmp_path / "w")
    dec = torch.load(folder / "decoder.pth", weights_only=True)
    torch.save({k: v for k, v in dec.items() if k != "28.bias"}, folder / "decoder.pth")
    with pytest.raises(AdaINWeightsError, match=r"decoder.pth lacks \['28.bias'\]"):
        AdaIN.from_files(folder)
    torch.save({**dec, "99.weight": torch.zeros(1)}, folder / "decoder.pth")
    with pytest.raises(AdaINWeightsError, match=r"tensors AdaIN does not define: \['99.weight'\]"):
        AdaIN.from_files(folder)
    # Arbitrary pickled objects are never unpickled (weights-only load).
    torch.save({"model": AdaINWeightsError("x")}, folder / "decoder.pth")
    with pytest.raises(AdaINWeightsError, match="not a weights-only torch file"):
        AdaIN.from_files(folder)
    with pytest.raises(FileNotFoundError, match="vgg_normalised.pth not found"):
        AdaIN.from_files(tmp_path)


def test_adain_takes_the_style_statistics():
    gen = torch.Generator().manual_seed(0)
    content = torch.randn(1, 4, 9, 7, generator=gen) * 3 + 1
    style = torch.randn(1, 4, 5, 6, generator=gen) * 0.5 - 2
    out = adaptive_instance_norm(content, style, eps=0.0)
    assert torch.allclose(out.mean((2, 3)), style.mean((2, 3)), atol=1e-5)
    assert torch.allclose(out.flatten(2).std(2), style.flatten(2).std(2), atol=1e-5)


@pytest.mark.parametrize(("h", "w"), [(32, 32), (37, 53), (480, 640)])
def test_size_kept(stylizer, h, w):
    out = corrupt(photo_like(h, w), "stylize", 3, seed=1, stylizer=stylizer)
    assert out.shape == (h, w, 3) and out.dtype == np.uint8


def test_deterministic_per_seed_and_image(stylizer):
    img = photo_like(48, 64)
    a = corrupt_item(img, "stylize", 4, 0, image_id=3, stylizer=stylizer)
    b = corrupt_item(img, "stylize", 4, 0, image_id=3, stylizer=stylizer)
    assert (a == b).all()
    others = [corrupt_item(img, "stylize", 4, 0, image_id=i, stylizer=stylizer) for i in range(8)]
    assert any((o != a).any() for o in others)  # another image id may draw another style


def test_alpha_zero_is_the_decoded_content(stylizer):
    img = photo_like(40, 56)
    with torch.inference_mode():
        x = torch.from_numpy(img).permute(2, 0, 1)[None].float() / 255
        recon = stylizer.model.decode(stylizer.model.encode(x))[0, :, :40, :56]
    expected = (recon.clamp(0, 1) * 255).round().byte().permute(1, 2, 0).numpy()
    for style in range(len(stylizer.styles)):
        assert (stylizer.transfer(img, style, 0.0) == expected).all()


def test_stronger_severity_moves_further_from_the_content(stylizer):
    img = photo_like(64, 64)
    base = stylizer.transfer(img, 0, 0.0).astype(float)
    dist = [
        np.abs(stylizer.transfer(img, 0, a).astype(float) - base).mean() for a in (0.2, 0.6, 1.0)
    ]
    assert 0 < dist[0] < dist[1] < dist[2]


def test_stylize_without_a_stylizer_says_what_it_needs():
    with pytest.raises(ValueError, match="stylize needs AdaIN weights .*stylize.styles"):
        corrupt(photo_like(32, 32), "stylize", 1)


def test_preview_with_stylize(tmp_path, capsys):
    from PIL import Image

    from vqarobust.cli import main

    weights, styles = tiny_adain(tmp_path / "w"), style_images(tmp_path / "s")
    src = tmp_path / "img.png"
    Image.fromarray(photo_like(48, 64)).save(src)
    out = tmp_path / "grid.png"
    args = [
        "preview",
        str(src),
        "--out",
        str(out),
        "--corruptions",
        "stylize",
        "--stylize-weights",
        str(weights),
        "--stylize-styles",
        str(styles),
    ]
    assert main(args) == 0
    with Image.open(out) as im:
        assert im.mode == "RGB" and im.size == (130 + 6 * 162, 18 + 120 + 2)
    assert main(["preview", str(src), "--out", str(out), "--corruptions", "stylize"]) == 2
    assert "give --stylize-weights and --stylize-styles" in capsys.readouterr().err


def test_config_asks_for_weights_and_styles(tmp_path):
    from vqarobust.config import ConfigError, validate_config

    config = {
        "dataset": {"name": "d", "adapter": "easy-vqa"},
        "corruptions": ["snow", "stylize"],
        "models": {"m": {"family": "blip", "path_or_id": "x/y"}},
    }
    with pytest.raises(ConfigError, match=r"stylize.*needs AdaIN weights.*set stylize.weights"):
        validate_config(dict(config))
    config["stylize"] = {"weights": str(tmp_path), "styles": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"stylize.weights: .* lacks \['vgg_normalised.pth'"):
        validate_config(dict(config))
    config["stylize"]["weights"] = str(tiny_adain(tmp_path / "w"))
    with pytest.raises(ConfigError, match="stylize.styles: .* holds no images"):
        validate_config(dict(config))
    config["stylize"]["styles"] = str(style_images(tmp_path / "s"))
    assert validate_config(dict(config))["stylize"]["style_size"] == 512
