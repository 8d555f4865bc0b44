import copy

import pytest
import yaml

from tests.conftest import REPO
from vqarobust.config import ConfigError, validate_config


@pytest.fixture()
def default_config():
    with open(REPO / "config" / "config.yaml") as fh:
        return yaml.safe_load(fh)


def test_default_config_is_valid_and_defaults_are_filled(default_config):
    cfg = validate_config(copy.deepcopy(default_config))
    assert cfg["scoring"]["metric"] == "vqa_accuracy"
    assert cfg["models"]["cnn-bow"]["dtype"] == "auto"
    assert cfg["models"]["cnn-bow"]["allow_download"] is False
    assert len(cfg["corruptions"]) == 14


def test_minimal_config_gets_defaults():
    cfg = validate_config(
        {
            "dataset": {"name": "d", "adapter": "easy-vqa"},
            "corruptions": ["snow"],
            "models": {"m": {"family": "vqa-classifier", "path_or_id": "some/id"}},
        }
    )
    assert cfg["severities"] == [1, 2, 3, 4, 5]
    assert cfg["seed"] == 0 and cfg["storage"]["image_format"] == "png"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c.update(corruptionz=[]), r"\(top level\).*'corruptionz' was unexpected"),
        (lambda c: c["dataset"].update(n_imgs=3), r"dataset.*'n_imgs' was unexpected"),
        (lambda c: c["corruptions"].append("gausian_noise"), r"corruptions\[14\].*gausian_noise"),
        (lambda c: c.update(severities=[1, 6]), r"severities\[1\].*6 is greater than"),
        (lambda c: c.update(severities=[-1]), r"severities\[0\]"),
        (lambda c: c["models"]["cnn-bow"].update(batchsize=3), r"models.cnn-bow.*'batchsize'"),
        (lambda c: c["models"]["cnn-bow"].update(family="nope"), r"models.cnn-bow.family"),
        (lambda c: c["models"]["cnn-bow"]["train"].update(architecture="rnn"), "architecture"),
        (lambda c: c["models"]["cnn-bow"].pop("train"), r"models.cnn-bow: give path_or_id"),
        (lambda c: c["scoring"].update(metric="bleu"), r"scoring.metric"),
        (lambda c: c["vre"]["preferences"].update(speed=1), r"vre.preferences.*'speed'"),
    ],
)
def test_bad_configs_fail_naming_the_key(default_config, mutate, message):
    mutate(default_config)
    with pytest.raises(ConfigError, match=message):
        validate_config(default_config)


def test_single_severity_corruption_rejects_higher_severities(default_config):
    default_config["corruptions"] = ["grayscale"]
    with pytest.raises(ConfigError, match="'grayscale' has severities 1..1"):
        validate_config(default_config)
    default_config["severities"] = [1]
    validate_config(default_config)
