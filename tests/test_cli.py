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
