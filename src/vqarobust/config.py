"""Validate a workflow config against its JSON schema and fill in defaults.

The schema (``workflow/schemas/config.schema.yaml``) rejects unknown keys; names that
live in registries (corruptions, model families, architectures) are checked here against
the registries themselves, so there is no second hand-kept list to drift.
"""

from __future__ import annotations

import copy
import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

DEFAULT_SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


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


def load_schema(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Read the config schema YAML."""
    with open(path or DEFAULT_SCHEMA, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def validate_config(
    config: MutableMapping[str, Any], schema_path: str | os.PathLike[str] | None = None
) -> MutableMapping[str, Any]:
    """Validate ``config`` in place (defaults filled in) and return it.

    Raises :class:`ConfigError` naming the first offending key.
    """
    from vqarobust import corruptions
    from vqarobust.models import FAMILIES
    from vqarobust.models.architectures import ARCHITECTURES

    schema = load_schema(schema_path)
    cls = _with_defaults(jsonschema.validators.validator_for(schema))
    errors = sorted(cls(schema).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        raise ConfigError(f"config error at {_where(e.absolute_path)}: {e.message}")

    r = config["rscore"]
    if not r["tolerance"] < r["maximum"]:
        raise ConfigError(
            f"config error at rscore: tolerance ({r['tolerance']}) must be below "
            f"maximum ({r['maximum']})"
        )
    known = set(corruptions.names())
    for i, name in enumerate(config["corruptions"]):
        if name not in known:
            raise ConfigError(
                f"config error at corruptions[{i}]: unknown corruption {name!r}; "
                f"known: {', '.join(sorted(known))}"
            )
        top = corruptions.max_severity(name)
        too_high = [s for s in config["severities"] if s > top]
        if too_high:
            raise ConfigError(
                f"config error at severities: {name!r} has severities 1..{top} only, "
                f"but {too_high} are configured"
            )
    from vqarobust.models.repository import ModelUnavailableError, resolve_spec

    for name, entry in list(config["models"].items()):
        try:
            # Merge the repository entry in, so that params (and reruns) see the full entry.
            resolved = resolve_spec(entry)
        except (KeyError, ModelUnavailableError) as exc:
            raise ConfigError(f"config error at models.{name}.from_repository: {exc}") from None
        resolved.setdefault("batch_size", 64)
        resolved.setdefault("dtype", "auto")
        resolved.setdefault("allow_download", False)
        resolved.setdefault("trust_remote_code", False)
        config["models"][name] = entry = resolved
        if "family" not in entry:
            raise ConfigError(f"config error at models.{name}: give family or from_repository")
        if entry["family"] not in FAMILIES:
            raise ConfigError(
                f"config error at models.{name}.family: unknown family {entry['family']!r}; "
                f"known: {', '.join(FAMILIES.list())}"
            )
        train = entry.get("train")
        if train is None and "path_or_id" not in entry:
            raise ConfigError(f"config error at models.{name}: give path_or_id or train")
        if train is not None and train["architecture"] not in ARCHITECTURES:
            raise ConfigError(
                f"config error at models.{name}.train.architecture: unknown architecture "
                f"{train['architecture']!r}; known: {', '.join(ARCHITECTURES.list())}"
            )
    return config


def load_config(path: str | os.PathLike[str]) -> MutableMapping[str, Any]:
    """Read a YAML config file and validate it."""
    with open(path, encoding="utf-8") as fh:
        config = yaml.safe_load(fh) or {}
    return validate_config(config)
