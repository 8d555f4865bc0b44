"""Validate a workflow config against its JSON schema and fill in defaults.

The schema (``vqarobust/schemas/config.schema.yaml``, package data, so that a
non-editable install validates too; ``workflow/schemas/`` links to it) rejects unknown
keys; names that live in registries (corruptions, model families, architectures,
dataset adapters) are checked here against the registries themselves, so there is no
second hand-kept list to drift. A model entry's keys are its family's
(:mod:`vqarobust.models.keys`), checked here too.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from vqarobust.config_keys import STYLIZE
from vqarobust.models import default_batch_size, entry_keys, feature_families

DEFAULT_SCHEMA = Path(__file__).resolve().parent / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """The config is invalid; the message names the offending key."""


def _with_defaults(validator_class: type) -> type:
    validate_props = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):  # noqa: ANN001
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _where(path: Any) -> str:
    parts = []
    for p in path:
        parts.append(f"[{p}]" if isinstance(p, int) else (f".{p}" if parts else str(p)))
    return "".join(parts) or "(top level)"


def _unknown(kind: str, name: str, known: Any) -> str:
    """'unknown corruption 'gausian_noise'; did you mean 'gaussian_noise'? known: ...'"""
    options = sorted(known)
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    hint = f" did you mean {close[0]!r}?" if close else ""
    return f"unknown {kind} {name!r};{hint} known: {', '.join(options)}"


def _explain(error: jsonschema.ValidationError) -> str:
    """The schema's message, with a "did you mean" for a misspelled key or value."""
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = list(error.schema.get("properties", {}))
        hints = []
        for key in error.instance:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {allowed}"
                hints.append(f"{key!r} was unexpected{hint}")
        return "; ".join(hints)
    if error.validator == "enum" and isinstance(error.instance, str):
        options = [str(v) for v in error.validator_value]
        close = difflib.get_close_matches(error.instance, options, n=1, cutoff=0.6)
        if close:
            return f"{error.message}; did you mean {close[0]!r}?"
    return error.message


def load_schema(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Read the config schema YAML."""
    # The C loader where PyYAML has it: the Snakefile reads the schema at every parse.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path or DEFAULT_SCHEMA, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=loader)


def _check_text(config: Mapping[str, Any]) -> None:
    """Known text perturbations and rankers; a train pool needs a train split."""
    from vqarobust import text
    from vqarobust.text.ranking import BQ_RANKERS

    known = text.names()
    for i, name in enumerate(config["text"]["perturbations"]):
        if name not in known:
            msg = _unknown("text perturbation", name, known)
            raise ConfigError(f"config error at text.perturbations[{i}]: {msg}")
    rankers = BQ_RANKERS.list(dataset="general")
    for i, name in enumerate(config["basic_questions"]["rankers"]):
        if name not in rankers:
            hint = (
                f"; {name} is a yes/no dataset's perturbation: list "
                f"bq_{name.removeprefix('ynbq_')} and add yes_no to basic_questions.datasets"
                if name in BQ_RANKERS
                else ""
            )
            msg = _unknown("basic-question ranker", name, rankers) + hint
            raise ConfigError(f"config error at basic_questions.rankers[{i}]: {msg}")
    _check_pool(config["basic_questions"])
    back = config["text"]["sentence"].get("back_translation")
    if back is not None and "back_model" not in back:
        raise ConfigError(
            "config error at text.sentence.back_translation: give back_model (the model "
            "from the pivot language back to English)"
        )
    _check_pool_splits(config["basic_questions"]["pool"], config["dataset"])


def filtered_text(config: Mapping[str, Any]) -> list[str]:
    """The configured text perturbations and sentence rewrites the fidelity filter applies
    to (none with ``text.min_similarity`` null)."""
    from vqarobust import text

    t = config["text"]
    if t["min_similarity"] is None:
        return []
    levels = t["filter_levels"]
    edits = [n for n in t["perturbations"] if text.level(n) in levels]
    return edits + (list(t["sentence"]) if "sentence" in levels else [])


def _similarity_encoder_missing(config: Mapping[str, Any]) -> str | None:
    """Why the fidelity filter's encoder cannot be loaded here, where the filter runs."""
    from vqarobust.text.encoder import missing

    if not filtered_text(config):
        return None
    reason = missing(config["text"]["similarity_encoder"])
    return None if reason is None else f"text.similarity_encoder: {reason}"


def _check_similarity_encoder(config: Mapping[str, Any]) -> None:
    """The filter's encoder is here (before any job runs): a run never falls back to
    another encoder, which would change which draws pass."""
    reason = _similarity_encoder_missing(config)
    if reason is not None:
        raise ConfigError(f"config error at {reason}")


def _check_pool_splits(pool: list[str], dataset: Mapping[str, Any]) -> None:
    """A pool's ``train`` part is a second prepared split, which only an adapter that has
    splits can give; the schema defaults ``train_split``, so its presence proves nothing."""
    from vqarobust.datasets import ADAPTERS

    if "train" not in pool:
        return
    adapter = dataset["adapter"]
    if not ADAPTERS.entry(adapter).tags["splits"]:
        with_splits = ", ".join(n for n in ADAPTERS if ADAPTERS.entry(n).tags["splits"])
        raise ConfigError(
            f"config error at basic_questions.pool: 'train' is a training split, which "
            f"adapter {adapter!r} does not have (it reads one set of questions; adapters "
            f"with splits: {with_splits}); use pool: [eval], and give more questions "
            "through basic_questions.pool_files"
        )
    if not dataset.get("train_split"):
        raise ConfigError("config error at basic_questions.pool: 'train' needs dataset.train_split")


def _check_pool(bq: Mapping[str, Any]) -> None:
    """A pool to rank from when rankers run, and pool files the job can tell apart."""
    from vqarobust.text.pools import pool_sources

    v = bq["vqabq"]
    if v["enabled"]:
        from vqarobust.text.ranking import perturbation_name

        run = [perturbation_name(r, d) for d in bq["datasets"] for r in bq["rankers"]]
        if v["ranker"] not in run:
            ranked = ", ".join(run) or "nothing"
            raise ConfigError(
                f"config error at basic_questions.vqabq.ranker: {v['ranker']!r} "
                f"is not ranked in this run (it ranks {ranked})"
            )
    if bq["rankers"] and not bq["pool"] and not bq["pool_files"]:
        raise ConfigError(
            "config error at basic_questions.pool: the rankers need a pool: "
            "name prepared splits (pool) or question files (pool_files)"
        )
    try:
        pool_sources(bq["pool"], bq["pool_files"])
    except ValueError as exc:
        raise ConfigError(f"config error at basic_questions.pool_files: {exc}") from None


_INT = re.compile(r"[+-]?\d+")


def coerce_strings(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` with the strings Snakemake's ``--config`` leaves (``'severities=[1,3,5]'``
    gives ``['1', '3', '5']``) turned into the integer, number, boolean or null the schema
    asks for; any other value (and any string where a string is allowed) is kept as it is.
    """
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        return {
            k: coerce_strings(v, props.get(k, extra if isinstance(extra, dict) else {}))
            for k, v in value.items()
        }
    if isinstance(value, list):
        items = schema.get("items", {})
        return [coerce_strings(v, items if isinstance(items, dict) else {}) for v in value]
    if not isinstance(value, str):
        return value
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    if "string" in kinds or not kinds:
        return value
    text = value.strip()
    if "integer" in kinds and _INT.fullmatch(text):
        return int(text)
    if "number" in kinds:
        try:
            return float(text)
        except ValueError:
            pass
    if "boolean" in kinds and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if "null" in kinds and text.lower() in ("null", "none", "~"):
        return None
    return value


def validate_config(
    config: MutableMapping[str, Any], schema_path: str | os.PathLike[str] | None = None
) -> MutableMapping[str, Any]:
    """Validate ``config`` in place (defaults filled in) and return it.

    Raises :class:`ConfigError` naming the first offending key.
    """
    explicit = _check_schema(config, load_schema(schema_path))
    _load_plugins(config["plugins"])
    r = config["rscore"]
    if not r["tolerance"] < r["maximum"]:
        raise ConfigError(
            f"config error at rscore: tolerance ({r['tolerance']}) must be below "
            f"maximum ({r['maximum']})"
        )
    _check_dataset(config["dataset"], explicit)
    _check_corruptions(config)
    if (styled := _styled(config)) and config["missing_weights"] == "fail":
        _check_stylize(config[STYLIZE], styled[0])
    _check_lpips(config.get("lpips") or {}, config["missing_weights"])
    _check_text(config)
    if config["missing_weights"] == "fail":
        _check_similarity_encoder(config)
    _check_context(config)
    _check_features(config)
    for name, entry in list(config["models"].items()):
        config["models"][name] = entry = _resolve_model(name, entry)
        _check_model(name, entry, config)
    _check_pixels(config)
    unknown = [m for m in config["uncertainty"]["effective_reference"] if m not in config["models"]]
    if unknown:
        raise ConfigError(
            f"config error at uncertainty.effective_reference: {unknown} are not "
            f"models of this config; models: {sorted(config['models'])}"
        )
    unpriced = sorted(set(config["prices"]["tokens"]) - set(config["models"]))
    if unpriced:
        raise ConfigError(
            f"config error at prices.tokens: {unpriced} are not models of this config; "
            f"models: {sorted(config['models'])}"
        )
    _check_throughput(config["resources"])
    if not config["corruptions"] and not config["text"]["perturbations"]:
        raise ConfigError(
            "config error at corruptions: the VRE suite needs image corruptions or text "
            "perturbations (text.perturbations), and none is configured"
        )
    return config


def _check_throughput(resources: Mapping[str, Any]) -> None:
    """The throughput table the GPU jobs' runtime requests come from reads (docs/paper.md,
    "GPU-hours before the run")."""
    from vqarobust.throughput import ThroughputError, read_table

    if resources["throughput"] is not None:
        try:
            read_table(resources["throughput"])
        except ThroughputError as exc:
            raise ConfigError(f"config error at resources.throughput: {exc}") from None


def _load_plugins(modules: Sequence[str]) -> None:
    """The installed plugins and the config's ``plugins`` modules, imported before the
    names they register are checked (:mod:`vqarobust.plugins`)."""
    from vqarobust import plugins
    from vqarobust.models import model_no_rerun_keys

    try:
        plugins.load(modules)
    except plugins.PluginError as exc:
        raise ConfigError(str(exc)) from None
    try:
        # A key is runtime-only for every family that reads it or for none: the
        # invalidation matrix has one row per key.
        model_no_rerun_keys()
    except ValueError as exc:
        raise ConfigError(f"config error at plugins: {exc}") from None


def _check_schema(config: MutableMapping[str, Any], schema: dict[str, Any]) -> set[str]:
    """Coerce, fill the schema's defaults in and validate ``config`` in place; the
    ``dataset`` keys the user wrote (before the defaults)."""
    coerced = coerce_strings(dict(config), schema)
    config.clear()
    config.update(coerced)
    given = config.get("dataset")
    explicit = set(given) if isinstance(given, dict) else set()
    cls = _with_defaults(jsonschema.validators.validator_for(schema))
    errors = sorted(cls(schema).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        raise ConfigError(f"config error at {_where(e.absolute_path)}: {_explain(e)}")
    return explicit


def _check_corruptions(config: Mapping[str, Any]) -> None:
    """Known corruptions, each with a configured severity it has; known controls."""
    from vqarobust import corruptions

    known = set(corruptions.names()) - set(corruptions.names(family="control"))
    for i, name in enumerate(config["corruptions"]):
        if name not in known:
            raise ConfigError(
                f"config error at corruptions[{i}]: {_unknown('corruption', name, known)}"
            )
        _check_plugin_corruption(i, name, config["geometric"])
        # A corruption with fewer levels runs at the configured severities it has.
        top = corruptions.max_severity(name)
        if not [s for s in config["severities"] if 1 <= s <= top]:
            raise ConfigError(
                f"config error at severities: {name!r} has severities 1..{top} only, "
                f"and none of them is configured ({config['severities']})"
            )
    _check_boxes(config)
    known_controls = corruptions.names(family="control")
    for i, name in enumerate(config["controls"]):
        if name not in known_controls:
            raise ConfigError(
                f"config error at controls[{i}]: {_unknown('control', name, known_controls)}"
            )


def _check_plugin_corruption(i: int, name: str, geometric: Mapping[str, Any]) -> None:
    """A plugin's corruption (any registered outside the package) needs only what the
    workflow gives (boxes, or a Stylizer from the ``stylize`` block), takes only
    ``geometric`` settings as options, and keeps the contract on a sample image (the
    package's own are tested; a stylizing one's needs the weights, so its jobs check)."""
    from vqarobust import corruptions, plugins
    from vqarobust.corruptions.boxes import NEEDS as BOXES

    origin = corruptions.CORRUPTIONS.entry(name).origin
    if origin.split(".")[0] == "vqarobust":
        return
    where = f"config error at corruptions[{i}]: corruption {name!r} of {plugins.describe(origin)}"
    need = corruptions.needs(name)
    if need not in (None, BOXES, corruptions.STYLE_WEIGHTS):
        raise ConfigError(
            f"{where} needs {need!r}, which the workflow cannot give a "
            "plugin corruption (only 'boxes' or vqarobust.corruptions.STYLE_WEIGHTS)"
        )
    unknown = sorted(set(corruptions.options(name)) - set(geometric))
    if unknown:
        raise ConfigError(
            f"{where} takes options {unknown}, which are not keys of the "
            f"config's geometric section ({sorted(geometric)})"
        )
    if need == corruptions.STYLE_WEIGHTS:
        return  # its sample run would need the AdaIN weights; corrupt() checks each output
    try:
        corruptions.check_contract(name)
    except ValueError as exc:
        raise ConfigError(f"{where} is refused: {exc}") from None


def _check_boxes(config: Mapping[str, Any]) -> None:
    """Box-aware corruptions need a dataset that says where its objects are."""
    from vqarobust import corruptions
    from vqarobust.corruptions.boxes import NEEDS
    from vqarobust.datasets.object_boxes import SOURCES

    boxed = [n for n in config["corruptions"] if corruptions.needs(n) == NEEDS]
    if not boxed:
        return
    adapter = config["dataset"]["adapter"]
    where = f"config error at corruptions[{config['corruptions'].index(boxed[0])}]"
    if adapter not in SOURCES:
        raise ConfigError(
            f"{where}: {boxed[0]!r} needs object boxes, which the {', '.join(SOURCES)} "
            f"datasets give (scene graphs, COCO instances); dataset.adapter {adapter!r} has "
            "none (zoom_crop and random_patches are the box-free versions)"
        )
    if adapter == "vqav2" and not config["context"].get("instances"):
        raise ConfigError(
            f"{where}: {boxed[0]!r} on vqav2 needs COCO's instance annotations; set "
            "context.instances to instances_val2014.json (docs/context.md)"
        )


def _resolve_model(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The model entry with its repository entry merged in (so that params, and reruns,
    see the full entry) and its defaults filled in."""
    from vqarobust.models.repository import ModelUnavailableError, resolve_spec

    try:
        resolved = resolve_spec(entry)
    except (KeyError, ModelUnavailableError) as exc:
        raise ConfigError(f"config error at models.{name}.from_repository: {exc}") from None
    # Defaults go only where the family reads the key (a plugin family's may not).
    known = entry_keys(resolved.get("family")).known
    if "batch_size" in known:
        resolved.setdefault("batch_size", default_batch_size(resolved.get("family")))
    served = resolved.get("family") == "openai-chat"
    imported = resolved.get("family") == "imported"
    # Trained reference models are small CPU models; checkpoints expect a GPU; a served
    # model's GPU is the server's, so its job needs none; an import reads files.
    on_cpu = "train" in resolved or served or imported
    resolved.setdefault("device", "cpu" if on_cpu else "cuda")
    # Scheduler requests of one inference job (a cluster profile reads them).
    resolved.setdefault("mem_mb", 4000)
    resolved.setdefault("runtime", 60)
    if served:
        _check_served(name, resolved)
    elif imported:
        _check_imported(name, resolved)
    for key, value in (("dtype", "auto"), ("allow_download", False), ("trust_remote_code", False)):
        if key in known:
            resolved.setdefault(key, value)
    return resolved


def _check_model(name: str, entry: dict[str, Any], config: Mapping[str, Any]) -> None:
    """A resolved model entry: a known family with its keys, weights to load (or a
    training block), and a training block that fits the dataset and architecture."""
    from vqarobust.models import FAMILIES

    if "family" not in entry:
        _check_entry_keys(name, entry, None)
        raise ConfigError(f"config error at models.{name}: give family or from_repository")
    if entry["family"] not in FAMILIES:
        unknown = _unknown("family", entry["family"], FAMILIES.list())
        raise ConfigError(f"config error at models.{name}.family: {unknown}")
    _check_family_keys(name, entry)
    from vqarobust.models.memory import AUTO_FAMILIES

    if entry.get("gpu_memory_gb") == "auto" and entry["family"] not in AUTO_FAMILIES:
        raise ConfigError(
            f"config error at models.{name}.gpu_memory_gb: auto estimates a chat "
            f"checkpoint ({' or '.join(AUTO_FAMILIES)}), not family {entry['family']}; give GB"
        )
    train = entry.get("train")
    needs_weights = entry["family"] not in ("openai-chat", "pnp-vqa", "imported")
    if train is None and "path_or_id" not in entry and needs_weights:
        raise ConfigError(f"config error at models.{name}: give path_or_id or train")
    if train is not None:
        _check_training(name, train, config["dataset"]["adapter"])
    _check_feature_model(name, entry, config)


def _check_training(name: str, train: Mapping[str, Any], adapter: str) -> None:
    """A reference model's training block: a dataset it trains on, a known architecture
    and only the keys that architecture takes."""
    from vqarobust.models.architectures import ARCHITECTURES

    if adapter not in ("easy-vqa", "scenes"):
        raise ConfigError(
            f"config error at models.{name}.train: reference models train on easy-vqa "
            f"or scenes only, not on dataset.adapter {adapter!r}; "
            "give path_or_id (a trained checkpoint) instead"
        )
    if train.get("swapmix") and adapter != "scenes":
        raise ConfigError(
            f"config error at models.{name}.train.swapmix: SwapMix training re-renders "
            "scenes; it needs dataset.adapter scenes"
        )
    if train["architecture"] not in ARCHITECTURES:
        unknown = _unknown("architecture", train["architecture"], ARCHITECTURES.list())
        raise ConfigError(f"config error at models.{name}.train.architecture: {unknown}")
    foreign = sorted(set(train) - TRAINING_KEYS - architecture_keys(train["architecture"]))
    if foreign:
        raise ConfigError(
            f"config error at models.{name}.train: {', '.join(map(repr, foreign))} "
            f"not used by architecture {train['architecture']!r} (it takes "
            f"{', '.join(sorted(architecture_keys(train['architecture'])))})"
        )


# Keys of models.<name>.train that every architecture's training reads.
TRAINING_KEYS = {
    "architecture",
    "epochs",
    "batch_size",
    "learning_rate",
    "weight_decay",
    "seed",
    "swapmix",
    "pretrain",
}


def architecture_keys(architecture: str) -> set[str]:
    """The hyper-parameters an architecture's builder takes (besides what training sets)."""
    import dataclasses

    from vqarobust.models.architectures import options_of

    return {f.name for f in dataclasses.fields(options_of(architecture))}


# PNP-VQA's three checkpoints replace path_or_id.
PNP_CHECKPOINTS = ("itm_model", "caption_model", "qa_model")


def _check_entry_keys(name: str, entry: Mapping[str, Any], family: str | None) -> None:
    """Only keys ``family`` declares (:mod:`vqarobust.models.keys`; with no family, any
    family's): a key its family would ignore is refused, naming the families that read
    it, or the close one it may be a typo of, and the keys the family reads."""
    from vqarobust import plugins
    from vqarobust.models import FAMILIES

    known = entry_keys(family).known
    for key in [k for k in entry if k not in known]:
        if family is None:
            raise ConfigError(f"config error at models.{name}: {_unknown('key', key, known)}")
        readers = [f for f in FAMILIES if key in entry_keys(f).known]
        origin = FAMILIES.entry(family).origin
        whose = "" if origin.split(".")[0] == "vqarobust" else f" (of {plugins.describe(origin)})"
        reads = f"family {family}{whose} reads {', '.join(sorted(known))}"
        if readers:
            raise ConfigError(
                f"config error at models.{name}.{key}: applies to family "
                f"{' or '.join(readers)} only, not {family}; {reads}"
            )
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"config error at models.{name}: unknown key {key!r}{hint} {reads}")


def _check_family_keys(name: str, entry: dict[str, Any]) -> None:
    """No key that the entry's family would ignore; PNP-VQA names its three checkpoints."""
    family = entry["family"]
    if family == "pnp-vqa":
        for key in ("path_or_id", "revision"):
            if key in entry:
                raise ConfigError(
                    f"config error at models.{name}.{key}: family pnp-vqa reads "
                    f"{', '.join(PNP_CHECKPOINTS)} instead"
                )
    _check_entry_keys(name, entry, family)
    if "chain_prompt" in entry:
        from vqarobust.text.ranking import check_chain_prompt

        try:
            check_chain_prompt(entry["chain_prompt"])
        except ValueError as exc:
            raise ConfigError(f"config error at models.{name}.chain_prompt: {exc}") from None
    if family == "pnp-vqa":
        missing = [k for k in PNP_CHECKPOINTS if k not in entry]
        if missing:
            raise ConfigError(f"config error at models.{name}: family pnp-vqa needs {missing}")


def _check_served(name: str, entry: dict[str, Any]) -> None:
    """A served model names its server and model, and its job runs on the CPU (the keys
    of in-process loading are not its family's: :func:`_check_entry_keys`)."""
    missing = [k for k in ("base_url", "model") if k not in entry]
    if missing:
        raise ConfigError(f"config error at models.{name}: family openai-chat needs {missing}")
    if entry["device"] != "cpu":
        raise ConfigError(
            f"config error at models.{name}.device: a served model runs on its server; its "
            "job asks for no GPU (device: cpu)"
        )
    from vqarobust.models.endpoint import EndpointError, check_endpoint

    try:
        check_endpoint(name, entry["base_url"], entry.get("api_key_env"))
    except EndpointError as exc:
        raise ConfigError(f"config error at {exc}") from None


def _check_imported(name: str, entry: dict[str, Any]) -> None:
    """An imported model names its logs, which hold files of its format (the keys of
    loading a model are not its family's: :func:`_check_entry_keys`)."""
    from vqarobust.harness_logs import exported_files, log_files

    if "logs" not in entry:
        raise ConfigError(f"config error at models.{name}: family imported needs logs")
    if entry["device"] != "cpu":
        raise ConfigError(
            f"config error at models.{name}.device: an import reads files; its job asks "
            "for no GPU (device: cpu)"
        )
    try:
        log_files(entry["logs"], entry.get("format", "lmms-eval"))
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(f"config error at models.{name}.logs: {exc}") from None
    if "exported" in entry:
        try:
            exported_files(entry["exported"])
        except FileNotFoundError as exc:
            raise ConfigError(f"config error at models.{name}.exported: {exc}") from None


def _check_context(config: dict[str, Any]) -> None:
    """SwapMix needs objects: scene graphs (scenes, gqa) or COCO instances (vqav2)."""
    context, adapter = config["context"], config["dataset"]["adapter"]
    if "instances" in context and adapter != "vqav2":
        raise ConfigError(f"config error at context.instances: vqav2 only, not {adapter!r}")
    if not context["perturbations"]:
        return
    if adapter == "vqav2" and not context.get("instances"):
        raise ConfigError(
            "config error at context.perturbations: on vqav2, SwapMix needs COCO's instance "
            "annotations; set context.instances to instances_val2014.json (docs/context.md)"
        )
    if adapter not in ("scenes", "vqav2", "gqa"):
        raise ConfigError(
            "config error at context.perturbations: SwapMix needs the objects of every image "
            f"and what each question depends on; dataset.adapter {adapter!r} has neither "
            "scene graphs nor COCO instances (use adapter scenes, gqa or vqav2, "
            "docs/context.md)"
        )


def _check_features(config: dict[str, Any]) -> None:
    """Feature sources the dataset can make; context settings that fit together."""
    from vqarobust.features.gqa import RELEASED_FILES

    context = config["context"]
    for i, k in enumerate(context["reliance_k"]):
        if k > context["k"]:
            raise ConfigError(
                f"config error at context.reliance_k[{i}]: {k} exceeds context.k "
                f"({context['k']}); reliance at k' uses the first k' of the run's k swaps"
            )
    path = context.get("word_vectors")
    if path is not None and not Path(path).is_file():
        raise ConfigError(f"config error at context.word_vectors: no file {path}")
    adapter = config["dataset"]["adapter"]
    for name, source in config["features"].items():
        kind = source["kind"]
        if adapter not in FEATURE_ADAPTERS[kind]:
            raise ConfigError(
                f"config error at features.{name}.kind: {kind} features need dataset.adapter "
                f"{' or '.join(FEATURE_ADAPTERS[kind])} ({FEATURE_NEEDS[kind]}), not {adapter!r}"
            )
        files = RELEASED_FILES.get(kind, ())
        for key in files:
            if not source.get(key):
                raise ConfigError(f"config error at features.{name}: kind {kind} needs {key}")
            if not Path(source[key]).exists():
                raise ConfigError(f"config error at features.{name}.{key}: no file {source[key]}")
        foreign = sorted(set(source) & {"info", "folder", "path"} - set(files))
        if foreign:
            raise ConfigError(
                f"config error at features.{name}.{foreign[0]}: kind {kind} does not read it"
            )
        if source["kind"] != "detector":
            foreign = sorted(set(source) & {"dim", "epochs", "batch_size", "learning_rate"})
            if foreign:
                raise ConfigError(
                    f"config error at features.{name}.{foreign[0]}: applies to kind detector "
                    f"only, not {source['kind']}"
                )
        else:
            for key, value in (
                ("dim", 64),
                ("epochs", 3),
                ("batch_size", 128),
                ("learning_rate", 0.002),
            ):
                source.setdefault(key, value)


# Which datasets can make each feature kind, and what it needs of them.
FEATURE_ADAPTERS = {
    "detector": ("scenes",),
    "perfect_sight": ("scenes", "gqa"),
    "gqa_h5": ("gqa",),
    "obj36": ("gqa",),
}
FEATURE_NEEDS = {
    "detector": "a CNN trained on the scenes' objects",
    "perfect_sight": "the objects of scene graphs",
    "gqa_h5": "GQA's scene graphs to match the detections to",
    "obj36": "GQA's scene graphs to match the detections to",
}


def _check_pixels(config: dict[str, Any]) -> None:
    """What needs pixels has them: a dataset read without images (GQA) or models on
    released features (of the clean images only) cannot have image perturbations."""
    from vqarobust import corruptions
    from vqarobust.features.gqa import RELEASED_FILES

    models, dataset = config["models"], config["dataset"]
    pixel_models = [m for m, e in models.items() if e["family"] not in feature_families()]
    perturbed = [k for k in ("corruptions", "controls") if config[k]]
    if dataset["adapter"] == "gqa" and not dataset.get("images"):
        if pixel_models:
            raise ConfigError(
                f"config error at models.{pixel_models[0]}: family "
                f"{models[pixel_models[0]]['family']} reads pixels, and dataset.images is not "
                "given (GQA without images runs feature models only)"
            )
        if perturbed:
            raise ConfigError(
                f"config error at {perturbed[0]}: image perturbations need dataset.images "
                f"(set {perturbed[0]}: [] to run GQA without images)"
            )
    kinds = {name: source["kind"] for name, source in config["features"].items()}
    released = [m for m, e in models.items() if kinds.get(e.get("features")) in RELEASED_FILES]
    if released and perturbed:
        raise ConfigError(
            f"config error at {perturbed[0]}: models.{released[0]} reads released features, "
            f"which are of the clean images only; set {perturbed[0]}: [] (or run the image "
            "perturbations in a config of their own)"
        )
    resized = [c for c in config["corruptions"] if corruptions.resizes(c)]
    detected = [m for m, e in models.items() if kinds.get(e.get("features")) == "detector"]
    if resized and detected:
        raise ConfigError(
            f"config error at corruptions[{config['corruptions'].index(resized[0])}]: "
            f"{resized[0]!r} stores smaller images, and models.{detected[0]} reads a detector "
            "source, whose crops are windows of a fixed pixel size (the objects would look "
            "smaller, not blurrier); run it in a config without detector features"
        )
    if config["context"]["perturbations"] and dataset["adapter"] == "gqa" and pixel_models:
        raise ConfigError(
            f"config error at models.{pixel_models[0]}: on gqa the context study swaps feature "
            "rows (feature models only); pixel swaps need scenes or vqav2"
        )


def _check_feature_model(name: str, entry: dict[str, Any], config: dict[str, Any]) -> None:
    """A feature model names a configured source; only feature models train as lxmert."""
    reads_features = entry["family"] in feature_families()
    train = entry.get("train")
    if train is not None and (train["architecture"] == "lxmert") != reads_features:
        raise ConfigError(
            f"config error at models.{name}.train.architecture: architecture lxmert is "
            f"trained for family lxmert only, and family {entry['family']} trains "
            f"{'lxmert' if reads_features else 'vilt or cnn-bow'}"
        )
    if not reads_features:
        return
    source = entry.get("features")
    if source is None:
        raise ConfigError(
            f"config error at models.{name}: family {entry['family']} reads region features; "
            "give features (the name of a source under the top-level features)"
        )
    if source not in config["features"]:
        known = sorted(config["features"]) or ["none configured"]
        raise ConfigError(
            f"config error at models.{name}.features: no feature source {source!r} "
            f"(known: {', '.join(known)})"
        )


def _check_lpips(settings: dict[str, Any], missing: str) -> None:
    """LPIPS needs both of its weight files, and (with ``missing_weights: fail``) they
    exist before any job runs; with ``skip`` an absent one turns LPIPS off
    (:func:`lpips_missing`)."""
    given = [k for k in ("backbone", "linear") if settings.get(k)]
    if len(given) == 1:
        other = "linear" if given[0] == "backbone" else "backbone"
        raise ConfigError(
            f"config error at lpips.{other}: LPIPS needs both lpips.backbone "
            f"and lpips.linear; only lpips.{given[0]} is set"
        )
    reason = lpips_missing(settings)
    if reason is not None and missing == "fail":
        raise ConfigError(f"config error at {reason}")


def lpips_missing(settings: Mapping[str, Any]) -> str | None:
    """Why LPIPS's configured weights cannot be read here (None when they can, or when
    LPIPS is off): the first of its files that is not there, and how to fetch it."""
    fetch = {
        "backbone": "torchvision's AlexNet, https://download.pytorch.org/models/"
        "alexnet-owt-7be5be79.pth",
        "linear": "the lpips wheel's lpips/weights/v0.1/alex.pth (`pip download "
        "--no-deps lpips==0.1.4`)",
    }
    for key in ("backbone", "linear"):
        if settings.get(key) and not Path(settings[key]).is_file():
            return f"lpips.{key}: no file {settings[key]} ({fetch[key]})"
    return None


def missing_weights(config: Mapping[str, Any]) -> dict[str, str]:
    """With ``missing_weights: skip``, the perturbations whose weights are not on this
    machine, each with the reason: stylize without its AdaIN files or style images, a
    sentence rewrite (``text.sentence``) whose model is neither a local folder nor in the
    Hugging Face cache (and may not be downloaded), and every text perturbation under the
    fidelity filter when the filter's encoder (``text.similarity_encoder``) is not here.
    Empty with ``fail``: then stylize and the filter's encoder stop the run at start and
    a rewrite's job names its model."""
    if config["missing_weights"] != "skip":
        return {}
    from vqarobust.models.loading import MissingWeightsError, resolve_weights

    out = {}
    for name in _styled(config):
        try:
            _check_stylize(config[STYLIZE], name)
        except ConfigError as exc:
            out[name] = str(exc).removeprefix("config error at ")
    for name, settings in config["text"]["sentence"].items():
        if settings.get("allow_download"):
            continue  # fetched by its job
        for key, revision in (("model", "revision"), ("back_model", "back_revision")):
            if key not in settings or Path(settings[key]).exists():
                continue  # a folder that is here: a mistake in it fails in its job, named
            try:
                resolve_weights(
                    f"text.sentence.{name}.{key}", settings[key], False, settings.get(revision)
                )
            except MissingWeightsError:
                out[name] = (
                    f"text.sentence.{name}.{key}: {settings[key]} is neither "
                    "a local folder nor in the Hugging Face cache (downloads off)"
                )
                break
    encoder = _similarity_encoder_missing(config)
    if encoder is not None:
        # Every filtered set would need the encoder: each is left out, with the reason.
        out |= {name: encoder for name in filtered_text(config) if name not in out}
    return out


def _styled(config: Mapping[str, Any]) -> list[str]:
    """The configured corruptions built from the ``stylize`` block (their ``needs`` tag)."""
    from vqarobust.corruptions import needs_style_weights

    return [n for n in config["corruptions"] if needs_style_weights(n)]


def _check_stylize(settings: dict[str, Any], name: str) -> None:
    """The ``stylize`` block's weights and styles, which corruption ``name`` needs, exist
    (before any job runs)."""
    from vqarobust.corruptions import needs
    from vqarobust.corruptions.stylize import WEIGHT_FILES, style_files

    missing = [k for k in ("weights", "styles") if not settings.get(k)]
    if missing:
        raise ConfigError(
            f"config error at {STYLIZE}: corruption {name!r} needs {needs(name)}; "
            f"set {', '.join(f'{STYLIZE}.{k}' for k in missing)}"
        )
    absent = [f for f in WEIGHT_FILES if not (Path(settings["weights"]) / f).is_file()]
    if absent:
        raise ConfigError(
            f"config error at {STYLIZE}.weights: {settings['weights']} lacks {absent}"
        )
    try:
        style_files(settings["styles"])
    except FileNotFoundError as exc:
        raise ConfigError(f"config error at {STYLIZE}.styles: {exc}") from None


def _check_dataset(dataset: dict[str, Any], explicit: set[str]) -> None:
    """Adapter-specific keys: required sources present, other adapters' keys absent."""
    from vqarobust.datasets import ADAPTERS, SOURCE_KEYS

    name = dataset["adapter"]
    if name not in ADAPTERS:
        raise ConfigError(f"config error at dataset.adapter: {_unknown('adapter', name, ADAPTERS)}")
    tags = ADAPTERS.entry(name).tags
    optional = tags.get("optional", ())
    needed = [k for k in tags["sources"] if not dataset.get(k) and k not in optional]
    if needed:
        raise ConfigError(f"config error at dataset: adapter {name!r} needs {needed}")
    foreign = [k for k in SOURCE_KEYS if k in explicit and k not in tags["sources"]]
    options = ("scene_seed", "columns", "download")  # read by one adapter each
    foreign += [k for k in options if k in explicit and k not in tags.get("options", ())]
    if not tags["splits"]:
        foreign += [k for k in ("split", "train_split", "train_n_images") if k in explicit]
    if foreign:
        raise ConfigError(
            f"config error at dataset.{foreign[0]}: adapter {name!r} does not read it "
            f"(it reads {', '.join(tags['sources']) or 'no source files'}). If it comes "
            "from config/config.yaml, which a --configfile merges into, run with "
            "--replace-workflow-config"
        )
    if dataset.get("manifest"):
        if dataset.get("n_images") is not None:
            raise ConfigError(
                "config error at dataset.n_images: give n_images or manifest, not both "
                "(the manifest fixes the images); over a config that sets n_images, such "
                "as config/config.yaml, add n_images: null beside the manifest"
            )
    else:
        dataset.setdefault("n_images", tags["default_n_images"])


def load_config(path: str | os.PathLike[str]) -> MutableMapping[str, Any]:
    """Read a YAML config file and validate it."""
    with open(path, encoding="utf-8") as fh:
        config = yaml.safe_load(fh) or {}
    return validate_config(config)
