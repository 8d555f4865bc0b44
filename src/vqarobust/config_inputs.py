"""The files a valid config names that are not on this machine: data files and folders,
weights folders and Hub checkpoints absent from the local Hugging Face cache, pool
files, style and LPIPS weights. ``vqarobust validate-config`` reports them (as warnings,
or with ``--strict`` as an error) before a run is started that would stop at its first
job; the workflow's own start-up validation does not, since a run may make some of its
inputs itself and its jobs name what they miss.

Nothing is downloaded: a Hub id is looked up in the local cache only. Relative paths are
read from the working directory, as the workflow reads them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqarobust.config_keys import STYLIZE

# The weight files a checkpoint folder holds (a folder with config.json alone is a
# download that stopped early).
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


@dataclass(frozen=True)
class MissingInput:
    """One input that is not here: the config key that names it, the path (or Hub id) it
    names and why it is missing."""

    key: str
    path: str
    why: str

    def __str__(self) -> str:
        return f"{self.key}: {self.path} {self.why}"


def missing_inputs(config: Mapping[str, Any]) -> list[MissingInput]:
    """Every input that a validated ``config`` (:func:`vqarobust.config.validate_config`,
    defaults filled in, repository entries merged) names and that is not on this
    machine, in config order: dataset sources and manifest, model checkpoints, pool
    files, context and perturbation files, sentence rewriters and the fidelity filter's
    encoder."""
    return [
        *_dataset(config["dataset"]),
        *_models(config["models"]),
        *_pool_files(config["basic_questions"]["pool_files"]),
        *_context(config["context"]),
        *_features(config.get("features") or {}),
        *_image_weights(config),
        *_text_models(config),
    ]


def _file(key: str, path: str) -> Iterator[MissingInput]:
    if not Path(path).exists():
        yield MissingInput(key, str(path), "does not exist")


def _dataset(dataset: Mapping[str, Any]) -> Iterator[MissingInput]:
    """The adapter's source files and a given manifest; a Hub dataset to download is no
    file of this machine."""
    from vqarobust.datasets import ADAPTERS

    tags = ADAPTERS.entry(dataset["adapter"]).tags
    for key in (*tags["sources"], "manifest"):
        path = dataset.get(key)
        if not path or (key in tags.get("remote", ()) and dataset.get("download")):
            continue
        yield from _file(f"dataset.{key}", path)


def _looks_local(path: str) -> bool:
    """A path that cannot be a Hub id (``org/name`` or ``name``)."""
    return Path(path).is_absolute() or path.startswith((".", "~")) or path.count("/") > 1


def _checkpoint(key: str, path_or_id: str, revision: str | None = None) -> Iterator[MissingInput]:
    """A checkpoint folder here (with config.json and weight files), or a Hub id whose
    snapshot is in the local cache; never the network."""
    local = Path(path_or_id)
    if local.is_dir():
        if not (local / "config.json").is_file():
            yield MissingInput(key, path_or_id, "holds no config.json (not a saved checkpoint)")
        elif not any(p.suffix in _WEIGHT_SUFFIXES for p in local.iterdir()):
            yield MissingInput(key, path_or_id, "holds no weight files (*.safetensors, *.bin)")
        return
    if _looks_local(path_or_id):
        yield MissingInput(key, path_or_id, "does not exist (a checkpoint folder)")
        return
    from huggingface_hub import snapshot_download

    fetch = f"`hf download {path_or_id}{f' --revision {revision}' if revision else ''}`"
    try:
        folder = Path(snapshot_download(path_or_id, revision=revision, local_files_only=True))
    except Exception:  # any failure means: not loadable offline
        yield MissingInput(
            key,
            path_or_id,
            f"is neither a folder here nor in the local Hugging Face cache; fetch it with {fetch}",
        )
        return
    if not any(p.suffix in _WEIGHT_SUFFIXES for p in folder.iterdir()):
        yield MissingInput(
            key, path_or_id, f"is in the Hugging Face cache without weight files; run {fetch}"
        )


def _models(models: Mapping[str, Mapping[str, Any]]) -> Iterator[MissingInput]:
    """Each model's checkpoints (PNP-VQA has three); a model the workflow trains, a served
    one and one that may download its weights need none here."""
    from vqarobust.models.identity import CHECKPOINT_KEYS

    for name, entry in models.items():
        if "train" in entry or entry.get("family") == "openai-chat" or entry.get("allow_download"):
            continue
        for key in CHECKPOINT_KEYS:
            value = entry.get(key)
            if isinstance(value, str):
                revision = entry.get("revision") if key == "path_or_id" else None
                yield from _checkpoint(f"models.{name}.{key}", value, revision)
        if entry.get("answers"):
            yield from _file(f"models.{name}.answers", entry["answers"])


def _pool_files(files: list[Any]) -> Iterator[MissingInput]:
    """The basic-question pool's question files and their annotations (an official VQA
    file is named by its ``folder``)."""
    from vqarobust.text.pools import pool_sources

    for i, entry in enumerate(files):
        (spec,) = pool_sources([], [entry]).values()
        where = f"basic_questions.pool_files[{i}]"
        for part in ("questions", "annotations"):
            path = spec[part]
            if not isinstance(path, str):
                continue
            if isinstance(entry, str):
                key = where
            else:
                key = f"{where}.folder" if "vqa" in entry else f"{where}.{part}"
            yield from _file(key, path)


def _context(context: Mapping[str, Any]) -> Iterator[MissingInput]:
    for key in ("instances", "word_vectors"):
        if context.get(key):
            yield from _file(f"context.{key}", context[key])


def _features(features: Mapping[str, Mapping[str, Any]]) -> Iterator[MissingInput]:
    """Released region features (GQA): their files and folders."""
    for name, source in features.items():
        for key in ("path", "info", "folder"):
            if source.get(key):
                yield from _file(f"features.{name}.{key}", source[key])


def _image_weights(config: Mapping[str, Any]) -> Iterator[MissingInput]:
    """The stylize block's AdaIN weights and styles (when a configured corruption is
    built from it) and LPIPS's two weight files (when set)."""
    from vqarobust.corruptions import needs_style_weights
    from vqarobust.corruptions.stylize import WEIGHT_FILES

    if any(needs_style_weights(name) for name in config["corruptions"]):
        settings = config[STYLIZE]
        if settings.get("weights"):
            for name in WEIGHT_FILES:
                path = str(Path(settings["weights"]) / name)
                yield from _file(f"{STYLIZE}.weights", path)
        if settings.get("styles"):
            yield from _file(f"{STYLIZE}.styles", settings["styles"])
    lpips = config.get("lpips") or {}
    for key in ("backbone", "linear"):
        if lpips.get(key):
            yield from _file(f"lpips.{key}", lpips[key])


def _after(reason: str, path: str) -> str:
    """``reason`` without the path it starts with (the record holds it)."""
    return reason.removeprefix(f"{path}: ").removeprefix(f"{path} ")


def _text_models(config: Mapping[str, Any]) -> Iterator[MissingInput]:
    """The sentence rewriters' models (unless they may download) and the fidelity
    filter's encoder (when a perturbation is filtered and it is not the shipped one)."""
    from vqarobust.config import filtered_text
    from vqarobust.text.encoder import missing

    text = config["text"]
    for name, settings in text["sentence"].items():
        if settings.get("allow_download"):
            continue
        for key, revision in (("model", "revision"), ("back_model", "back_revision")):
            if settings.get(key):
                where = f"text.sentence.{name}.{key}"
                yield from _checkpoint(where, settings[key], settings.get(revision))
    encoder = text.get("similarity_encoder")
    reason = missing(encoder) if filtered_text(config) else None
    if reason is not None:
        yield MissingInput("text.similarity_encoder", encoder, _after(reason, encoder))
