"""The keys of a model entry, as each family declares them (vqarobust.models.keys): the
config check, the adapter's arguments, the params and the runtime channel all follow the
declaration, a plugin family's too."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from vqarobust import reruns
from vqarobust.config import ConfigError, load_schema, validate_config
from vqarobust.models import FAMILIES, entry_keys, feature_families, generative_families, load_model
from vqarobust.models.keys import (
    CHECKPOINT,
    ENTRY,
    GENERATIVE,
    UNDECLARED,
    FamilyKeys,
    no_rerun_keys,
)
from vqarobust.params import NoRerun, answer_spec, runtime_options

TINY = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
# Every entry's keys: the workflow's and the scheduler's.
WORKFLOW = {"family", "from_repository", "device", "gpu_memory_gb", "mem_mb", "runtime"}
WORKFLOW |= {"gpu_model"}
HUB = {"path_or_id", "revision", "dtype", "trust_remote_code", "use_safetensors"}
HUB |= {"batch_size", "allow_download"}
SERVED = {"base_url", "model", "seed", "retry_filtered", "batch_size", "api_key_env"}
SERVED |= {"max_concurrency", "adaptive_concurrency", "timeout_s", "max_retries"}
SERVED |= {"request_budget", "served_revision", "chain_prompt", "max_new_tokens", "prompt"}
PNP = {"itm_model", "caption_model", "qa_model", "pnp", "seed", "dtype", "trust_remote_code"}
PNP |= {"use_safetensors", "batch_size", "allow_download", "share_image_features"}
PNP |= {"chain_prompt"}
# Each family's keys beyond the workflow's, as its adapter's arguments and the workflow's
# readers use them (the adapters' signatures; chain_prompt: VQABQ; features: LXMERT's
# inputs; train: train_model).
OWN = {
    "vqa-classifier": HUB | {"share_image_features", "train"},
    "blip": HUB | {"share_image_features", "max_new_tokens", "chain_prompt"},
    "llava": HUB | {"share_image_features", "max_new_tokens", "prompt", "chain_prompt"},
    "image-text-to-text": HUB
    | {"share_image_features", "max_new_tokens", "prompt", "chain_prompt"},
    "pnp-vqa": PNP,
    "vle": HUB | {"share_image_features"},
    "lxmert": HUB | {"answers", "features", "train"},
    "openai-chat": SERVED,
    "imported": {"logs", "format", "exported"},
}


def test_each_family_reads_the_keys_it_declares():
    assert {f: set(entry_keys(f).known) - WORKFLOW for f in FAMILIES} == OWN
    assert generative_families() == [
        "blip",
        "image-text-to-text",
        "llava",
        "openai-chat",
        "pnp-vqa",
    ]
    assert feature_families() == ["lxmert"]


def test_the_schema_types_every_key_of_the_built_in_families():
    entry = load_schema()["properties"]["models"]["additionalProperties"]
    assert set(entry["properties"]) == set().union(*OWN.values()) | WORKFLOW


def test_the_matrix_reads_the_runtime_model_keys_from_the_declarations():
    runtime = {k.removeprefix("models.*.") for k in reruns.RUNTIME if k.startswith("models.")}
    assert runtime == {
        *("batch_size", "allow_download", "share_image_features", "gpu_memory_gb", "mem_mb"),
        *("runtime", "gpu_model", "api_key_env", "max_concurrency", "adaptive_concurrency"),
        *("timeout_s", "max_retries", "request_budget"),
    }
    # base_url is in the runtime channel, but its host keys the answers: not a runtime key.
    assert "models.*.base_url" not in reruns.RUNTIME
    assert reruns.readers("models.*.base_url") == ["run_model", "image_attention"]


def test_a_key_declared_both_ways_is_refused(plugin_families):
    why = NoRerun("no", "none")
    two = {"a": FamilyKeys(answers={"speed"}), "b": FamilyKeys(runtime={"speed": why})}
    message = r"runtime-only by one family only: speed \(runtime-only in b, not in a\)"
    with pytest.raises(ValueError, match=message):
        no_rerun_keys(two)
    # A plugin family that makes a built-in answer key runtime-only stops validation.
    plugin_families.register("fast-plugin", keys=FamilyKeys(runtime={"dtype": why}))(_factory)
    with pytest.raises(ConfigError, match=r"config error at plugins: .* dtype \(runtime-only in"):
        validate_config(_config({"family": "blip", "path_or_id": "x"}))


def _config(entry: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(TINY)
    config["models"] = {"m": entry}
    return config


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"family": "vqa-classifier", "path_or_id": "x", "max_new_tokens": 5},
            r"config error at models\.m\.max_new_tokens: applies to family blip or "
            r"image-text-to-text or llava or openai-chat only, not vqa-classifier; family "
            r"vqa-classifier reads allow_download, batch_size, device, dtype, family, ",
        ),
        (
            {"family": "blip", "path_or_id": "x", "batchsize": 5},
            r"config error at models\.m: unknown key 'batchsize'; did you mean 'batch_size'\? "
            r"family blip reads allow_download, batch_size, chain_prompt, ",
        ),
        (
            {"family": "lxmert", "path_or_id": "x", "features": "f", "share_image_features": True},
            r"models\.m\.share_image_features: applies to family blip or image-text-to-text or "
            r"llava or pnp-vqa or vle or vqa-classifier only, not lxmert",
        ),
        (
            {"family": "blip", "train": {"architecture": "vilt"}},
            r"models\.m\.train: applies to family lxmert or vqa-classifier only, not blip",
        ),
        (
            {"famly": "blip", "path_or_id": "x"},
            r"config error at models\.m: unknown key 'famly'; did you mean 'family'\?",
        ),
    ],
)
def test_a_key_the_family_does_not_read_fails_at_validation(entry, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(_config(entry))


@pytest.fixture()
def plugin_families(monkeypatch):
    """The family registry, with families a test registers removed after it."""
    monkeypatch.setattr(FAMILIES, "_entries", dict(FAMILIES._entries))
    return FAMILIES


def _factory(**kwargs: Any) -> dict[str, Any]:
    """A factory that returns what it is given, for the test to read."""
    return kwargs


def test_an_undeclared_plugin_family_reads_a_checkpoints_keys(plugin_families):
    plugin_families.register("plain-plugin")(_factory)
    assert entry_keys("plain-plugin") == ENTRY | UNDECLARED
    config = validate_config(_config({"family": "plain-plugin", "path_or_id": "x"}))
    entry = config["models"]["m"]
    assert answer_spec(entry) == {
        "device": "cuda",
        "dtype": "auto",
        "family": "plain-plugin",
        "path_or_id": "x",
        "trust_remote_code": False,
    }
    assert runtime_options(entry) == {"batch_size": 64, "allow_download": False}
    with pytest.raises(ConfigError, match=r"models\.m\.prompt: applies to family .*plain-plugin"):
        validate_config(_config({"family": "plain-plugin", "path_or_id": "x", "prompt": "q"}))


def test_a_plugin_factory_from_a_file_loaded_by_path_loads(plugin_families):
    """load_model imports a family's declared adapter module first (vqarobust.collector);
    a factory without one, whose module cannot be imported by name, is called as it is."""
    namespace: dict[str, Any] = {"__name__": "loaded_by_path"}
    exec("def factory(**kwargs):\n    return kwargs", namespace)
    plugin_families.register("path-plugin")(namespace["factory"])
    loaded = load_model({"family": "path-plugin", "path_or_id": "x"}, name="m")
    assert loaded == {"name": "m", "device": "cpu", "path_or_id": "x"}


def test_a_plugin_family_declares_keys_of_its_own(plugin_families):
    """docs/extending.md's declaration."""
    own = FamilyKeys(answers={"temperature"}, runtime={"workers": NoRerun("threads", "a test")})
    keys = CHECKPOINT | GENERATIVE | own
    plugin_families.register("my-family", keys=keys)(_factory)
    assert "my-family" in generative_families()
    given = {"family": "my-family", "path_or_id": "x", "temperature": 0.5, "workers": 3}
    # Keys no built-in family reads are the declaring family's: the schema lets them by.
    entry = validate_config(_config(given))["models"]["m"]
    assert answer_spec(entry)["temperature"] == 0.5 and "workers" not in answer_spec(entry)
    assert runtime_options(entry) == {"batch_size": 64, "allow_download": False, "workers": 3}
    made = load_model({**entry, "mem_mb": 10}, name="w", device="cpu")
    assert made == {
        "name": "w",
        "device": "cpu",
        "path_or_id": "x",
        "temperature": 0.5,
        "workers": 3,
        "batch_size": 64,
        "dtype": "auto",
        "allow_download": False,
        "trust_remote_code": False,
    }
    with pytest.raises(ConfigError, match=r"unknown key 'temprature'; did you mean 'temperature'"):
        validate_config(_config({**given, "temprature": 1}))


def test_a_family_that_reads_no_batch_size_gets_none(plugin_families):
    """Every entry's keys come with any declaration; the loading defaults only where the
    family reads them."""
    plugin_families.register("bare-plugin", keys=FamilyKeys(answers={"path_or_id"}))(_factory)
    assert entry_keys("bare-plugin").known == {"path_or_id"} | ENTRY.known
    entry = validate_config(_config({"family": "bare-plugin", "path_or_id": "x"}))["models"]["m"]
    assert entry == {
        "family": "bare-plugin",
        "path_or_id": "x",
        "device": "cuda",
        "mem_mb": 4000,
        "runtime": 60,
    }
    assert runtime_options(entry) == {}
