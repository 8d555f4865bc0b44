from tests.conftest import REPO
from vqarobust.cli import main


def test_corruptions_lists_names_with_family(capsys):
    assert main(["corruptions", "--family", "noise"]) == 0
    out = capsys.readouterr().out
    assert "gaussian_noise" in out and "noise" in out and "snow" not in out


def test_validate_config(tmp_path, capsys):
    assert main(["validate-config", str(REPO / "config" / "config.yaml")]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "dataset: {name: x, adapter: easy-vqa}\ncorruptions: [snow]\nmodels: {}\nfoo: 1\n"
    )
    assert main(["validate-config", str(bad)]) == 2
    assert "foo" in capsys.readouterr().err


def test_preview_writes_a_grid(tmp_path):
    import numpy as np
    from PIL import Image

    src = tmp_path / "img.png"
    Image.fromarray(np.full((40, 48, 3), 128, np.uint8)).save(src)
    out = tmp_path / "grid.png"
    assert main(["preview", str(src), "--out", str(out), "--corruptions", "snow", "grayscale"]) == 0
    with Image.open(out) as im:
        assert im.size[0] > 300 and im.size[1] > 100
