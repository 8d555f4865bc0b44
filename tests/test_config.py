import copy
import re

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
    # The 14 of the benchmark, and grayscale (one level, out of VRE: colour bias).
    from vqarobust.corruptions import names

    assert sorted(cfg["corruptions"]) == sorted([*names(benchmark=True), "grayscale"])


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
        (lambda c: c["corruptions"].append("gausian_noise"), r"corruptions\[15\].*gausian_noise"),
        (lambda c: c.update(severities=[1, 6]), r"severities\[1\].*6 is greater than"),
        (lambda c: c.update(severities=[-1]), r"severities\[0\]"),
        (lambda c: c["models"]["cnn-bow"].update(batchsize=3), r"models.cnn-bow.*'batchsize'"),
        (lambda c: c["models"]["cnn-bow"].update(family="nope"), r"models.cnn-bow.family"),
        (lambda c: c["models"]["cnn-bow"].update(train={"architecture": "rnn"}), "architecture"),
        (lambda c: c["models"]["cnn-bow"].pop("path_or_id"), r"models.cnn-bow: give path_or_id"),
        (lambda c: c["scoring"].update(metric="bleu"), r"scoring.metric"),
        (lambda c: c["vre"]["preferences"].update(speed=1), r"vre.preferences.*'speed'"),
        (lambda c: c["text"].update(on_low_similarity="discard"), r"text.on_low_similarity"),
        (lambda c: c["text"].update(similarity_encoder=""), r"text.similarity_encoder"),
    ],
)
def test_bad_configs_fail_naming_the_key(default_config, mutate, message):
    mutate(default_config)
    with pytest.raises(ConfigError, match=message):
        validate_config(default_config)


def test_single_severity_corruption_runs_at_the_severities_it_has(default_config):
    # Beside five-level corruptions grayscale runs at its one level...
    default_config["corruptions"] = ["snow", "grayscale"]
    validate_config(default_config)
    # ... but a run must configure a severity it has.
    default_config["severities"] = [2, 4]
    with pytest.raises(ConfigError, match=r"'grayscale' has severities 1..1 only, and none"):
        validate_config(default_config)


def test_paper_config_is_valid_with_adapter_defaults():
    cfg = validate_config(yaml.safe_load((REPO / "config" / "paper.yaml").read_text()))
    assert cfg["dataset"]["n_images"] == 3000 and cfg["dataset"]["on_bad_image"] == "fail"
    assert cfg["models"]["llava-1.5-13b"]["device"] == "cuda"  # checkpoints need a GPU
    assert cfg["models"]["vilt"]["path_or_id"] == "dandelin/vilt-b32-finetuned-vqa"
    assert len(cfg["corruptions"]) == 14 and cfg["storage"]["image_format"] == "jpeg"


def test_basic_question_study_config_is_the_papers_protocol():
    cfg = validate_config(yaml.safe_load((REPO / "config" / "basic-questions.yaml").read_text()))
    bq = cfg["basic_questions"]
    assert bq["datasets"] == ["general", "yes_no"] and bq["pool"] == []
    assert {
        "bq_lasso",
        "bq_bleu1",
        "bq_bleu2",
        "bq_bleu3",
        "bq_bleu",
        "bq_rouge",
        "bq_cider",
        "bq_meteor",
    } <= set(bq["rankers"])
    assert bq["lasso"] == {"mode": "paper", "lambda": 1e-6} and bq["k"] == 21
    # The paper's pool: VQA v1's train2014 and val2014 questions, with their annotations.
    assert [(f["vqa"], f["split"], f["task"], f["annotations"]) for f in bq["pool_files"]] == [
        ("v1", "train2014", "OpenEnded", True),
        ("v1", "val2014", "OpenEnded", True),
    ]


def test_reference_models_run_on_the_cpu(default_config):
    cfg = validate_config(default_config)
    assert {m["device"] for m in cfg["models"].values()} == {"cpu"}
    # A model the workflow trains defaults to the CPU it is trained on.
    study = validate_config(yaml.safe_load((REPO / "config" / "reference-models.yaml").read_text()))
    assert {m["device"] for m in study["models"].values()} == {"cpu"}


VQAV2 = {
    "name": "v",
    "adapter": "vqav2",
    "questions": "q.json",
    "annotations": "a.json",
    "images": "val2014.zip",
}


@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        (
            {"name": "v", "adapter": "vqa2"},
            r"dataset.adapter: unknown adapter 'vqa2'; did you mean 'vqav2'\? known: ",
        ),
        (
            {"name": "v", "adapter": "vqav2", "questions": "q.json"},
            r"adapter 'vqav2' needs \['annotations', 'images'\]",
        ),
        ({**VQAV2, "split": "val"}, r"dataset.split: adapter 'vqav2' does not read it"),
        ({**VQAV2, "path": "x.jsonl"}, r"dataset.path: adapter 'vqav2' does not read it"),
        ({"name": "e", "adapter": "easy-vqa", "images": "x"}, r"dataset.images: adapter 'easy"),
        ({**VQAV2, "manifest": "ids.txt", "n_images": 10}, "give n_images or manifest, not both"),
        ({**VQAV2, "on_bad_image": "ignore"}, r"dataset.on_bad_image: 'ignore' is not one of"),
        ({"name": "j", "adapter": "jsonl"}, r"adapter 'jsonl' needs \['path'\]"),
    ],
)
def test_dataset_keys_are_checked_per_adapter(dataset, message):
    config = {
        "dataset": dataset,
        "corruptions": ["snow"],
        "models": {"m": {"family": "vqa-classifier", "path_or_id": "x/y"}},
    }
    with pytest.raises(ConfigError, match=message):
        validate_config(config)


def test_adapter_defaults_fill_n_images():
    blip = {"m": {"family": "blip", "path_or_id": "x/y"}}
    for dataset, n in (
        (VQAV2, 3000),
        ({"name": "e", "adapter": "easy-vqa"}, 200),
        ({"name": "j", "adapter": "jsonl", "path": "d.jsonl"}, None),
    ):
        cfg = validate_config({"dataset": dict(dataset), "corruptions": ["snow"], "models": blip})
        assert cfg["dataset"]["n_images"] == n
    cfg = validate_config(
        {"dataset": {**VQAV2, "manifest": "ids.txt"}, "corruptions": ["snow"], "models": blip}
    )
    assert "n_images" not in cfg["dataset"]


def test_training_needs_easy_vqa():
    study = yaml.safe_load((REPO / "config" / "reference-models.yaml").read_text())
    validate_config(copy.deepcopy(study))
    study["dataset"] = dict(VQAV2)
    with pytest.raises(ConfigError, match=r"models.vilt-tiny.train: reference models train on"):
        validate_config(study)


def test_params_are_canonical_and_leave_runtime_settings_out():
    from vqarobust.params import answer_spec, canonical, runtime_options

    a = {
        "family": "blip",
        "path_or_id": "x",
        "dtype": "auto",
        "batch_size": 8,
        "mem_mb": 9000,
        "gpu_model": "a100",
        "prompt": "p",
    }
    b = dict(reversed(list(a.items())), batch_size=64, mem_mb=1)
    assert repr(answer_spec(a)) == repr(answer_spec(b))
    assert "batch_size" not in answer_spec(a)
    assert answer_spec({**a, "dtype": "bfloat16"}) != answer_spec(a)
    assert answer_spec({**a, "revision": "v2"}) != answer_spec(a)
    assert runtime_options(a) == {"batch_size": 8}
    assert repr(canonical({"b": {"y": 1, "x": [{"d": 1, "c": 2}]}, "a": 0})) == (
        "{'a': 0, 'b': {'x': [{'c': 2, 'd': 1}], 'y': 1}}"
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda c: c.update(severitys=c.pop("severities")),
            r"\(top level\): 'severitys' was unexpected; did you mean 'severities'\?",
        ),
        (
            lambda c: c["dataset"].update(n_image=5),
            r"dataset: 'n_image' was unexpected; did you mean 'n_images'\?",
        ),
        (
            lambda c: c["corruptions"].append("gausian_noise"),
            r"unknown corruption 'gausian_noise'; did you mean 'gaussian_noise'\?",
        ),
        (
            lambda c: c["scoring"].update(metric="vqa_acuracy"),
            r"scoring.metric: .*did you mean 'vqa_accuracy'\?",
        ),
        (lambda c: c.update(zzz=1), r"'zzz' was unexpected; allowed: \["),
    ],
)
def test_misspellings_get_a_hint(default_config, mutate, message):
    mutate(default_config)
    with pytest.raises(ConfigError, match=message):
        validate_config(default_config)


def _schema_keys(schema: dict, prefix: str = "") -> set[str]:
    keys = set()
    for key, sub in schema.get("properties", {}).items():
        keys.add(key)
        keys |= _schema_keys(sub)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        keys |= _schema_keys(extra)
    return keys


def test_every_setting_is_documented():
    from vqarobust.config import load_schema

    doc = (REPO / "docs" / "configuration.md").read_text()
    quoted = " ".join(re.findall(r"`([^`]*)`", doc))
    missing = sorted(k for k in _schema_keys(load_schema()) if not re.search(rf"\b{k}\b", quoted))
    assert not missing, f"docs/configuration.md does not document {missing}"


def test_strings_from_snakemake_config_are_coerced_to_the_schema_types(default_config):
    from vqarobust.config import coerce_strings, load_schema, validate_config

    schema = load_schema()
    config = dict(
        default_config,
        severities=["1", "3", "5"],
        dataset={**default_config["dataset"], "n_images": "500"},
    )
    validate_config(config)
    assert config["severities"] == [1, 3, 5] and config["dataset"]["n_images"] == 500
    number = {"type": "number"}
    assert coerce_strings("0.5", number) == 0.5 and coerce_strings("x", number) == "x"
    assert coerce_strings("true", {"type": "boolean"}) is True
    assert coerce_strings("null", {"type": ["integer", "null"]}) is None
    assert coerce_strings("12", {"type": "string"}) == "12"  # a string stays a string
    assert coerce_strings(["1"], schema["properties"]["severities"]) == [1]
    bad = dict(default_config, severities=["one"])
    with pytest.raises(ConfigError, match=r"severities\[0\]: 'one' is not of type 'integer'"):
        validate_config(bad)


@pytest.mark.parametrize("override", ["severities=[1,3,5]", "dataset={n_images: 500}"])
def test_the_documented_config_recipes_work_as_written(override):
    import shutil
    import subprocess

    from tests.conftest import REPO

    snakemake = shutil.which("snakemake", path=str(REPO / ".venv" / "bin")) or "snakemake"
    # A dry run plans the jobs (and validates the config) without touching any file.
    done = subprocess.run(
        [snakemake, "-n", "--quiet", "--config", override],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert override in (REPO / "docs" / "configuration.md").read_text()


def test_config_readmes_essential_keys_validate():
    """config/README.md's "essential keys" block is a whole config as written."""
    from vqarobust.config import validate_config

    text = (REPO / "config" / "README.md").read_text()
    essential = r"## The essential keys\n\n```yaml config\n(.*?)```"
    block = re.search(essential, text, flags=re.S).group(1)
    config = yaml.safe_load(block)
    validate_config(config)
    assert config["dataset"]["adapter"] == "jsonl" and config["dataset"]["path"]


def test_the_manifest_recipe_validates_over_the_shipped_configs():
    """docs/configuration.md's and docs/paper.md's manifest recipe, merged over a shipped
    config that sets n_images, as a --configfile would merge it; without its
    ``n_images: null`` the error says what to add."""
    from vqarobust.config import validate_config

    assert (
        "`dataset: {manifest: ids.txt, n_images: null}`"
        in (REPO / "docs" / "configuration.md").read_text()
    )
    assert "`dataset: {manifest: that/file, n_images: null}`" in " ".join(
        (REPO / "docs" / "paper.md").read_text().split()
    )
    for shipped in ("config.yaml", "paper.yaml"):
        config = yaml.safe_load((REPO / "config" / shipped).read_text())
        assert config["dataset"]["n_images"] is not None
        config["dataset"].update({"manifest": "ids.txt", "n_images": None})
        validate_config(config)
        config = yaml.safe_load((REPO / "config" / shipped).read_text())
        config["dataset"]["manifest"] = "ids.txt"
        with pytest.raises(ConfigError, match="add n_images: null beside the manifest"):
            validate_config(config)


def test_the_question_side_recipe_for_vqav2_fails_by_name_then_validates():
    """docs/paper.md: paper.yaml with config.yaml's ``text:`` and ``basic_questions:``
    blocks. As copied, the pool's ``train`` part is a split the vqav2 adapter does not
    have: a named error at validation, not a traceback in the job; with the docs'
    ``pool: [eval]`` it validates."""
    from vqarobust.config import validate_config

    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert "train" in default["basic_questions"]["pool"]
    config = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    config.update(text=default["text"], basic_questions=copy.deepcopy(default["basic_questions"]))
    with pytest.raises(ConfigError) as err:
        validate_config(copy.deepcopy(config))
    assert str(err.value).startswith("config error at basic_questions.pool: 'train'")
    assert "adapter 'vqav2' does not have" in str(err.value) and "pool: [eval]" in str(err.value)
    config["basic_questions"]["pool"] = ["eval"]
    validate_config(config)
    assert "`pool: [eval]`" in (REPO / "docs" / "paper.md").read_text()
    # An adapter with splits keeps the pool's train part.
    validate_config(copy.deepcopy(default))
