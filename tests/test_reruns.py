"""The invalidation matrix (vqarobust.reruns): every leaf of the config schema, changed
to another valid value on a small study config, reruns exactly its declared dependents
in Snakemake's plan; the keys of the runtime channel rerun nothing."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.plans import downstream, jobs, triggered, write_config
from vqarobust import reruns as matrix
from vqarobust.config import load_schema

TINY = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())

# Study configs whose job graphs hold every stage and read every key: the workflow test's
# tiny easy-VQA config, a scenes study with context swaps, feature sources and SwapMix
# training, GQA with its released features, and VQAv2 with every model family, stylize,
# sentence rewrites (one without its model), pool files, the fidelity filter and VQABQ.
# Only job graphs are built (nothing runs), so the files they name need only exist.
SCENES = {
    "seed": 0,
    "dataset": {
        "name": "scenes",
        "adapter": "scenes",
        "scene_seed": 0,
        "n_images": 4,
        "train_n_images": 8,
    },
    "corruptions": ["gaussian_noise"],
    "severities": [1, 2],
    "context": {
        "perturbations": ["swap_class", "swap_attribute"],
        "k": 2,
        "reliance_k": [1, 2],
        "word_vectors": "data/words.txt",
    },
    "features": {
        "detector": {"kind": "detector", "dim": 8, "epochs": 1},
        "sight": {"kind": "perfect_sight"},
    },
    "basic_questions": {"rankers": ["bq_cosine"], "k": 3},
    "models": {
        "vilt-tiny": {
            "family": "vqa-classifier",
            "train": {
                "architecture": "vilt",
                "epochs": 1,
                "swapmix": {"p_object": 0.5, "p_class": 0.5, "k": 2},
            },
        },
        "lxmert-detector": {
            "family": "lxmert",
            "features": "detector",
            "train": {
                "architecture": "lxmert",
                "epochs": 1,
                "dropout": 0.0,
                "swapmix": {"p_object": 0.5, "p_class": 0.5, "k": 2},
            },
        },
        "lxmert-sight": {
            "family": "lxmert",
            "features": "sight",
            "train": {"architecture": "lxmert", "epochs": 1},
        },
    },
}
GQA = {
    "seed": 0,
    "dataset": {
        "name": "gqa",
        "adapter": "gqa",
        "questions": "data/q.json",
        "scene_graphs": "data/sg.json",
        "n_images": 4,
    },
    "corruptions": [],
    "controls": [],
    "text": {"perturbations": ["keyboard"]},
    "context": {"perturbations": ["swap_class"], "k": 2},
    "features": {
        "obj36": {"kind": "obj36", "path": "data/obj36.tsv"},
        "objects": {"kind": "gqa_h5", "info": "data/objects/info.json", "folder": "data/objects"},
    },
    "models": {
        "lxmert": {
            "family": "lxmert",
            "path_or_id": "unc-nlp/lxmert-gqa-uncased",
            "answers": "data/label2ans.json",
            "features": "obj36",
        },
        "lxmert-objects": {
            "family": "lxmert",
            "path_or_id": "unc-nlp/lxmert-gqa-uncased",
            "answers": "data/label2ans.json",
            "features": "objects",
        },
    },
}
VQAV2 = {
    "seed": 0,
    "dataset": {
        "name": "vqav2",
        "adapter": "vqav2",
        "questions": "data/q.json",
        "annotations": "data/a.json",
        "images": "data/images",
        "n_images": 4,
    },
    "corruptions": ["gaussian_noise", "grayscale", "stylize", "rotate", "occlude_context"],
    "controls": [],
    "severities": [1],
    "stylize": {"weights": "data/adain", "styles": "data/styles"},
    "lpips": {"backbone": "data/alexnet.pth", "linear": "data/alex.pth"},
    "text": {
        "perturbations": ["keyboard"],
        "min_similarity": 0.5,
        "filter_levels": ["char", "word", "sentence"],
        "sentence": {
            "formal": {
                "model": "data/t5",
                "prompt": "formal: {question}",
                "sampling": {"top_k": 50},
            },
            # Never fetched: missing_weights: skip leaves it out.
            "casual": {"model": "data/absent"},
        },
    },
    "context": {"perturbations": ["swap_class"], "k": 1, "instances": "data/instances.json"},
    "basic_questions": {
        "rankers": ["bq_lasso", "bq_cosine", "bq_bleu"],
        "k": 3,
        "pool": ["eval"],
        "pool_files": ["data/pool.jsonl"],
        "lasso": {"mode": "paper"},
        "vqabq": {"enabled": True, "ranker": "bq_lasso"},
    },
    "models": {
        "vilt": {"from_repository": "vilt-vqa"},
        "blip": {"family": "blip", "path_or_id": "Salesforce/blip-vqa-base"},
        "llava": {
            "family": "llava",
            "path_or_id": "llava-hf/llava-1.5-7b-hf",
            "chain_prompt": "{basic_questions} Question: {question}",
        },
        "chat": {"family": "image-text-to-text", "path_or_id": "org/chat"},
        "pnp": {"from_repository": "pnp-vqa-large", "pnp": {"num_captions": 10}},
        "served": {"family": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "llava"},
        "imported": {"family": "imported", "logs": "data/lmms"},
    },
}
HF = {
    "seed": 0,
    "corruptions": ["gaussian_noise"],
    "severities": [1],
    "dataset": {
        "name": "hf",
        "adapter": "hf",
        "path": "data/hf",
        "split": "validation",
        "columns": {"preset": "vqav2"},
    },
    "models": {"blip": {"family": "blip", "path_or_id": "Salesforce/blip-vqa-base"}},
}
# Per-subset inference, whose attention maps are image_attention's jobs (a per-model job
# draws its own): its graph keeps that rule's declared inputs checked.
TINY_PER_SUBSET = {**TINY, "inference_jobs": "subset"}
SCENARIOS = {
    "tiny": TINY,
    "tiny-per-subset": TINY_PER_SUBSET,
    "scenes": SCENES,
    "gqa": GQA,
    "vqav2": VQAV2,
    "hf": HF,
}
FILES = (
    "data/words.txt",
    "data/q.json",
    "data/sg.json",
    "data/obj36.tsv",
    "data/objects/info.json",
    "data/label2ans.json",
    "data/a.json",
    "data/images/1.jpg",
    "data/adain/vgg_normalised.pth",
    "data/adain/decoder.pth",
    "data/adain2/vgg_normalised.pth",
    "data/adain2/decoder.pth",
    "data/styles/a.jpg",
    "data/t5/config.json",
    "data/instances.json",
    "data/pool.jsonl",
    "data/pool2.jsonl",
    "data/hf/dataset_dict.json",
    "data/hf2/dataset_dict.json",
    "data/ids.txt",
    "data/glove.txt",
    "data/q.jsonl",
    "data/encoder/config.json",
    "data/t5b/config.json",
    "data/alexnet.pth",
    "data/alex.pth",
    "data/alexnet2.pth",
    "data/alex2.pth",
    "data/lmms/20260101_000000_samples_vqarobust_clean_0.jsonl",
    "data/lmms/m_vqarobust_clean_0.tsv",
    "data/lmms2/20260102_000000_samples_vqarobust_clean_0.jsonl",
    "data/export/README.md",
    "data/export/data/clean-0/test.parquet",
)

Edit = Callable[[dict], None]


def put(path: str, value: Any, *, drop: tuple[str, ...] = ()) -> Edit:
    """An edit setting the dotted ``path`` (creating mappings on the way), after
    removing the dotted keys ``drop``."""

    def edit(config: dict) -> None:
        for key in drop:
            *parents, last = key.split(".")
            node = config
            for p in parents:
                node = node[p]
            node.pop(last, None)
        *parents, last = path.split(".")
        node = config
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value

    edit.path = path  # type: ignore[attr-defined]
    return edit


# For every leaf: the study config where it is read, and a change to another valid value
# (lists grow: an item dropped reruns only the jobs that read the whole list).
CHANGES: dict[str, tuple[str, Edit]] = {
    "study": ("tiny", put("study", "mine")),
    "seed": ("tiny", put("seed", 1)),
    # A module importable anywhere that registers nothing (tests/test_plugins.py loads
    # real plugins).
    "plugins": ("tiny", put("plugins", ["json"])),
    "dataset.name": ("tiny", put("dataset.name", "easy")),
    "dataset.adapter": ("tiny", put("dataset.adapter", "scenes")),
    "dataset.scene_seed": ("scenes", put("dataset.scene_seed", 1)),
    "dataset.split": ("tiny", put("dataset.split", "train")),
    "dataset.n_images": ("tiny", put("dataset.n_images", 5)),
    "dataset.manifest": (
        "tiny",
        put("dataset.manifest", "data/ids.txt", drop=("dataset.n_images",)),
    ),
    "dataset.on_bad_image": ("tiny", put("dataset.on_bad_image", "skip")),
    "dataset.questions": ("gqa", put("dataset.questions", "data/a.json")),
    "dataset.scene_graphs": ("gqa", put("dataset.scene_graphs", "data/a.json")),
    "dataset.annotations": ("vqav2", put("dataset.annotations", "data/sg.json")),
    "dataset.images": ("vqav2", put("dataset.images", "data/styles")),
    "dataset.path": ("hf", put("dataset.path", "data/hf2")),
    "dataset.columns.preset": ("hf", put("dataset.columns.preset", "single-answer")),
    "dataset.columns.image": ("hf", put("dataset.columns.image", "picture")),
    "dataset.columns.question": ("hf", put("dataset.columns.question", "text")),
    "dataset.columns.answers": ("hf", put("dataset.columns.answers", "labels")),
    "dataset.columns.question_id": ("hf", put("dataset.columns.question_id", "qid")),
    "dataset.columns.image_id": ("hf", put("dataset.columns.image_id", "iid")),
    "dataset.columns.question_type": ("hf", put("dataset.columns.question_type", "qtype")),
    "dataset.columns.answer_type": ("hf", put("dataset.columns.answer_type", "atype")),
    "dataset.download": ("hf", put("dataset.download", True)),
    "dataset.train_split": ("tiny", put("dataset.train_split", "test")),
    "dataset.train_n_images": ("tiny", put("dataset.train_n_images", 50)),
    "storage.image_format": ("tiny", put("storage.image_format", "jpeg")),
    "storage.jpeg_quality": ("tiny", put("storage.jpeg_quality", 90)),
    "storage.shard_mb": ("tiny", put("storage.shard_mb", 8)),
    "storage.named_files": ("tiny", put("storage.named_files", "on_nodes")),
    "corruptions": ("tiny", put("corruptions", ["gaussian_noise", "brightness", "contrast"])),
    "controls": ("vqav2", put("controls", ["blank"])),
    "stylize.weights": ("vqav2", put("stylize.weights", "data/adain2")),
    "missing_weights": ("vqav2", put("missing_weights", "skip")),
    "ssim.window": ("tiny", put("ssim.window", "uniform")),
    "lpips.backbone": ("vqav2", put("lpips.backbone", "data/alexnet2.pth")),
    "lpips.linear": ("vqav2", put("lpips.linear", "data/alex2.pth")),
    "stylize.styles": ("vqav2", put("stylize.styles", "data/images")),
    "stylize.style_size": ("vqav2", put("stylize.style_size", 256)),
    "geometric.border": ("vqav2", put("geometric.border", "reflect")),
    "geometric.flip_questions": ("tiny", put("geometric.flip_questions", "leave_out")),
    "text.perturbations": (
        "tiny",
        put("text.perturbations", ["keyboard", "synonym_replace", "char_swap"]),
    ),
    "text.min_similarity": ("tiny", put("text.min_similarity", 0.5)),
    "text.max_tries": ("tiny", put("text.max_tries", 3)),
    "text.word_share": ("tiny", put("text.word_share", [0.05, 0.1, 0.15, 0.2, 0.25])),
    "text.char_share": ("tiny", put("text.char_share", 0.3)),
    "text.char_min_length": ("tiny", put("text.char_min_length", 4)),
    "text.on_low_similarity": ("vqav2", put("text.on_low_similarity", "drop")),
    "text.filter_levels": ("vqav2", put("text.filter_levels", ["word"])),
    "text.similarity_encoder": ("vqav2", put("text.similarity_encoder", "data/encoder")),
    "text.sentence.*.model": ("vqav2", put("text.sentence.formal.model", "data/t5b")),
    "text.sentence.*.prompt": ("vqav2", put("text.sentence.formal.prompt", "{question}")),
    "text.sentence.*.sampling.top_k": ("vqav2", put("text.sentence.formal.sampling.top_k", 10)),
    "text.sentence.*.sampling.top_p": ("vqav2", put("text.sentence.formal.sampling.top_p", 0.5)),
    "text.sentence.*.back_model": ("vqav2", put("text.sentence.formal.back_model", "data/t5b")),
    "text.sentence.*.back_prompt": (
        "vqav2",
        put("text.sentence.formal.back_prompt", "back: {question}"),
    ),
    "text.sentence.*.revision": ("vqav2", put("text.sentence.formal.revision", "v2")),
    "text.sentence.*.back_revision": ("vqav2", put("text.sentence.formal.back_revision", "v2")),
    "text.sentence.*.max_new_tokens": ("vqav2", put("text.sentence.formal.max_new_tokens", 16)),
    "text.sentence.*.batch_size": ("vqav2", put("text.sentence.formal.batch_size", 4)),
    "text.sentence.*.device": ("vqav2", put("text.sentence.formal.device", "cuda")),
    "text.sentence.*.allow_download": ("vqav2", put("text.sentence.formal.allow_download", True)),
    "context.perturbations": ("scenes", put("context.perturbations", ["swap_class"])),
    "context.k": ("scenes", put("context.k", 3)),
    "context.reliance_k": ("scenes", put("context.reliance_k", [1])),
    "context.threshold": ("scenes", put("context.threshold", 0.3)),
    "context.max_objects": ("scenes", put("context.max_objects", 2)),
    "context.class_attributes": ("scenes", put("context.class_attributes", "same")),
    "context.attribute_swaps": ("scenes", put("context.attribute_swaps", "sets")),
    "context.donors": ("scenes", put("context.donors", "sample")),
    "context.word_vectors": ("scenes", put("context.word_vectors", "data/glove.txt")),
    "context.instances": ("vqav2", put("context.instances", "data/a.json")),
    "context.min_area": ("vqav2", put("context.min_area", 512)),
    "features.*.kind": ("scenes", put("features.detector", {"kind": "perfect_sight"})),
    "features.*.info": ("gqa", put("features.objects.info", "data/a.json")),
    "features.*.folder": ("gqa", put("features.objects.folder", "data/images")),
    "features.*.path": ("gqa", put("features.obj36.path", "data/a.json")),
    "features.*.dim": ("scenes", put("features.detector.dim", 16)),
    "features.*.epochs": ("scenes", put("features.detector.epochs", 2)),
    "features.*.batch_size": ("scenes", put("features.detector.batch_size", 16)),
    "features.*.learning_rate": ("scenes", put("features.detector.learning_rate", 0.01)),
    "basic_questions.rankers": (
        "tiny",
        put("basic_questions.rankers", ["bq_cosine", "bq_lasso", "bq_bleu"]),
    ),
    "basic_questions.datasets": ("tiny", put("basic_questions.datasets", ["general", "yes_no"])),
    "basic_questions.pool_files": (
        "vqav2",
        put("basic_questions.pool_files", ["data/pool.jsonl", "data/pool2.jsonl"]),
    ),
    "basic_questions.encoder": ("tiny", put("basic_questions.encoder", "data/encoder")),
    "basic_questions.allow_download": ("tiny", put("basic_questions.allow_download", True)),
    "basic_questions.vqabq.enabled": ("tiny", put("basic_questions.vqabq.enabled", True)),
    "basic_questions.vqabq.ranker": ("vqav2", put("basic_questions.vqabq.ranker", "bq_cosine")),
    "basic_questions.vqabq.thresholds": (
        "vqav2",
        put("basic_questions.vqabq.thresholds", [0.5, 0.5, 0.5]),
    ),
    "basic_questions.vqabq.grid": ("vqav2", put("basic_questions.vqabq.grid", True)),
    "basic_questions.vqabq.tune_share": ("vqav2", put("basic_questions.vqabq.tune_share", 0.3)),
    "basic_questions.lasso.mode": ("tiny", put("basic_questions.lasso.mode", "paper")),
    "basic_questions.lasso.lambda": ("vqav2", put("basic_questions.lasso.lambda", 0.001)),
    "basic_questions.k": ("tiny", put("basic_questions.k", 9)),
    "basic_questions.pool": ("scenes", put("basic_questions.pool", ["eval", "train"])),
    "basic_questions.lasso_alpha": ("tiny", put("basic_questions.lasso_alpha", 0.01)),
    "basic_questions.prefilter": ("tiny", put("basic_questions.prefilter", 100)),
    "basic_questions.exclude_main": ("tiny", put("basic_questions.exclude_main", "run")),
    "basic_questions.bleu_smoothing": ("vqav2", put("basic_questions.bleu_smoothing", "add_one")),
    "severities": ("tiny", put("severities", [1, 3, 5])),
    "scoring.metric": ("tiny", put("scoring.metric", "exact_match")),
    "scoring.on_failed_answers": ("tiny", put("scoring.on_failed_answers", "skip")),
    "text.dropped_questions": ("tiny", put("text.dropped_questions", "own_set")),
    "scoring.max_unanswered_share": ("tiny", put("scoring.max_unanswered_share", 0.05)),
    "vre.preferences.first_drop": ("tiny", put("vre.preferences.first_drop", 2.0)),
    "vre.preferences.range_of_error": ("tiny", put("vre.preferences.range_of_error", 2.0)),
    "vre.preferences.error_rate": ("tiny", put("vre.preferences.error_rate", 2.0)),
    "vre.preferences.average_error": ("tiny", put("vre.preferences.average_error", 2.0)),
    "vre.preferences.corruption_error_diff": (
        "tiny",
        put("vre.preferences.corruption_error_diff", 2.0),
    ),
    "vre.include_grayscale": ("vqav2", put("vre.include_grayscale", True)),
    "rscore.tolerance": ("tiny", put("rscore.tolerance", 0.1)),
    "rscore.maximum": ("tiny", put("rscore.maximum", 10)),
    "uncertainty.resamples": ("tiny", put("uncertainty.resamples", 50)),
    "uncertainty.level": ("tiny", put("uncertainty.level", 0.9)),
    "uncertainty.cluster": ("tiny", put("uncertainty.cluster", "question")),
    "uncertainty.seed": ("tiny", put("uncertainty.seed", 1)),
    "uncertainty.adjust": ("tiny", put("uncertainty.adjust", "bh")),
    "uncertainty.effective_reference": (
        "tiny",
        put("uncertainty.effective_reference", ["cnn-bow", "vilt-tiny"]),
    ),
    "diagnostics.attention.n": ("tiny", put("diagnostics.attention.n", 3)),
    "threads.train": ("scenes", put("threads.train", 2)),
    "threads.infer": ("tiny", put("threads.infer", 2)),
    "inference_jobs": ("tiny", put("inference_jobs", "subset")),
    "prices.currency": ("tiny", put("prices.currency", "EUR")),
    "prices.gpu_hour": ("tiny", put("prices.gpu_hour", 2.5)),
    "prices.cpu_hour": ("tiny", put("prices.cpu_hour", 0.05)),
    "prices.tokens.*.prompt_per_million": (
        "tiny",
        put("prices.tokens.vilt-tiny", {"prompt_per_million": 0.15, "completion_per_million": 0.6}),
    ),
    "prices.tokens.*.completion_per_million": (
        "tiny",
        put("prices.tokens.vilt-tiny", {"prompt_per_million": 0, "completion_per_million": 0.6}),
    ),
    "models.*.from_repository": (
        "vqav2",
        put(
            "models.blip.from_repository",
            "blip-vqa-capfilt-large",
            drop=("models.blip.family", "models.blip.path_or_id"),
        ),
    ),
    # Generative to classifier: its VQABQ sets change from the chain to the concatenation.
    "models.*.family": ("vqav2", put("models.blip.family", "vqa-classifier")),
    "models.*.gpu_memory_gb": ("vqav2", put("models.blip.gpu_memory_gb", 9)),
    "models.*.device": ("tiny", put("models.cnn-bow.device", "auto")),
    "models.*.revision": ("vqav2", put("models.blip.revision", "main")),
    "models.*.mem_mb": ("vqav2", put("models.blip.mem_mb", 1000)),
    "models.*.runtime": ("vqav2", put("models.blip.runtime", 10)),
    "models.*.gpu_model": ("vqav2", put("models.blip.gpu_model", "a100")),
    "resources.throughput": (
        "vqav2",
        put("resources.throughput", str(REPO / "docs/results/gpu-throughput-h200.json")),
    ),
    "resources.runtime_margin": ("vqav2", put("resources.runtime_margin", 3)),
    "models.*.path_or_id": ("vqav2", put("models.blip.path_or_id", "Salesforce/blip-vqa-2")),
    "models.*.batch_size": ("tiny", put("models.vilt-tiny.batch_size", 4)),
    "models.*.dtype": ("vqav2", put("models.blip.dtype", "float32")),
    "models.*.allow_download": ("vqav2", put("models.blip.allow_download", True)),
    "models.*.trust_remote_code": ("vqav2", put("models.chat.trust_remote_code", True)),
    "models.*.use_safetensors": ("vqav2", put("models.blip.use_safetensors", False)),
    "models.*.max_new_tokens": ("vqav2", put("models.llava.max_new_tokens", 5)),
    "models.*.prompt": ("vqav2", put("models.llava.prompt", "Q: {question} A:")),
    "models.*.features": ("scenes", put("models.lxmert-sight.features", "detector")),
    "models.*.answers": ("gqa", put("models.lxmert.answers", "data/a.json")),
    "models.*.chain_prompt": (
        "vqav2",
        put("models.llava.chain_prompt", "{basic_questions} Q: {question}"),
    ),
    "models.*.share_image_features": ("vqav2", put("models.pnp.share_image_features", False)),
    "models.*.base_url": ("vqav2", put("models.served.base_url", "http://127.0.0.1:10/v1")),
    "models.*.model": ("vqav2", put("models.served.model", "qwen")),
    "models.*.api_key_env": ("vqav2", put("models.served.api_key_env", "SERVED_API_KEY")),
    "models.*.max_concurrency": ("vqav2", put("models.served.max_concurrency", 2)),
    "models.*.adaptive_concurrency": ("vqav2", put("models.served.adaptive_concurrency", False)),
    "models.*.timeout_s": ("vqav2", put("models.served.timeout_s", 5)),
    "models.*.max_retries": ("vqav2", put("models.served.max_retries", 1)),
    "models.*.seed": ("vqav2", put("models.served.seed", 3)),
    "models.*.retry_filtered": ("vqav2", put("models.served.retry_filtered", True)),
    "models.*.request_budget": ("vqav2", put("models.served.request_budget", 100)),
    "models.*.served_revision": ("vqav2", put("models.served.served_revision", "2026-01")),
    "models.*.logs": ("vqav2", put("models.imported.logs", "data/lmms2")),
    "models.*.format": ("vqav2", put("models.imported.format", "vlmevalkit")),
    "models.*.exported": ("vqav2", put("models.imported.exported", "data/export")),
    "models.*.itm_model": ("vqav2", put("models.pnp.itm_model", "org/itm")),
    "models.*.caption_model": ("vqav2", put("models.pnp.caption_model", "org/cap")),
    "models.*.qa_model": ("vqav2", put("models.pnp.qa_model", "org/qa")),
    **{
        f"models.*.pnp.{k}": ("vqav2", put(f"models.pnp.pnp.{k}", v))
        for k, v in {
            "block_num": 6,
            "itm_max_length": 20,
            "num_patches": 10,
            "num_captions": 5,
            "caption_prompt": "a photo of",
            "cap_min_length": 5,
            "cap_max_length": 15,
            "top_k": 10,
            "top_p": 0.8,
            "repetition_penalty": 1.2,
            "max_caption_rounds": 2,
            "num_captions_fid": 2,
            "qa_min_length": 2,
            "qa_max_length": 5,
            "num_beams": 2,
            "enc_token_id": 5,
        }.items()
    },
    "models.*.train.architecture": (
        "tiny",
        put(
            "models.cnn-bow.train.architecture",
            "vilt",
            drop=("models.cnn-bow.train.channels", "models.cnn-bow.train.hidden_dim"),
        ),
    ),
    **{
        f"models.*.train.{k}": ("tiny", put(f"models.{m}.train.{k}", v))
        for k, m, v in (
            ("epochs", "vilt-tiny", 2),
            ("batch_size", "vilt-tiny", 8),
            ("learning_rate", "vilt-tiny", 0.01),
            ("weight_decay", "vilt-tiny", 0.1),
            ("seed", "vilt-tiny", 1),
            ("hidden_size", "vilt-tiny", 16),
            ("num_hidden_layers", "vilt-tiny", 2),
            ("num_attention_heads", "vilt-tiny", 4),
            ("patch_size", "vilt-tiny", 8),
            ("intermediate_size", "vilt-tiny", 64),
            ("channels", "cnn-bow", [4, 8, 8]),
            ("embed_dim", "cnn-bow", 8),
            ("hidden_dim", "cnn-bow", 8),
            ("pool_size", "cnn-bow", 2),
            ("fusion", "cnn-bow", "film"),
            ("film_blocks", "cnn-bow", 2),
            ("first_stride", "cnn-bow", 2),
        )
    },
    **{
        f"models.*.train.{k}": ("scenes", put(f"models.lxmert-sight.train.{k}", v))
        for k, v in (("l_layers", 2), ("x_layers", 2), ("r_layers", 2), ("dropout", 0.2))
    },
    **{
        f"models.*.train.swapmix.{k}": ("scenes", put(f"models.vilt-tiny.train.swapmix.{k}", v))
        for k, v in (("p_object", 0.3), ("p_class", 0.3), ("k", 1))
    },
    "models.*.train.pretrain.answers": (
        "tiny",
        put("models.vilt-tiny.train.pretrain", {"answers": ["circle"], "epochs": 1}),
    ),
    "models.*.train.pretrain.epochs": (
        "tiny",
        put("models.vilt-tiny.train.pretrain", {"answers": ["circle"], "epochs": 2}),
    ),
}


@pytest.fixture(scope="module")
def schema():
    return load_schema()


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """Per study config: a working directory holding the files it names, and its job
    graph."""
    out = {}
    for name, config in SCENARIOS.items():
        workdir = tmp_path_factory.mktemp(name)
        for path in FILES:
            (workdir / path).parent.mkdir(parents=True, exist_ok=True)
            (workdir / path).write_text("1\n")
        write_config(workdir, config)
        out[name] = (workdir, jobs(workdir))
    return out


def test_every_schema_leaf_has_a_change_and_is_declared(schema):
    leaves = matrix.schema_leaves(schema)
    assert sorted(leaves) == sorted(CHANGES), "a key without an entry here"
    undeclared = [k for k in leaves if not matrix.readers(k) and matrix.runtime_entry(k) is None]
    assert not undeclared, f"keys no stage reads and not in reruns.RUNTIME: {undeclared}"


def test_every_run_option_names_its_config_keys():
    import dataclasses

    from vqarobust.analyses.base import OPTION_KEYS, RunOptions

    assert {f.name for f in dataclasses.fields(RunOptions)} == set(OPTION_KEYS)


def _check(key: str, path: str, before: dict, after: dict) -> list[str]:
    """What is wrong with the plan of a change of ``key`` (at ``path``): a stage that
    reruns though none of the jobs of ``key``'s declared readers (within its scope: that
    model's, that split's) does, or reruns upstream; a declared reader that does not
    rerun; no rerun for a key outside the runtime channel, or any for one inside it."""
    readers, scope = set(matrix.readers(key)), matrix.scope(path)

    def in_scope(job) -> bool:
        return job.stage in readers and all(
            dict(job.wildcards).get(w, v) == v for w, v in scope.items()
        )

    fired = triggered(before, after)
    observed = downstream(after, fired)
    declared = downstream(after, {k for k in fired if in_scope(after[k])})
    present = {job.stage for job in after.values() if in_scope(job)}
    problems = []
    if observed != declared:
        problems.append(f"undeclared: {sorted(observed - declared)}")
    if present - observed:
        problems.append(f"declared readers that do not rerun: {sorted(present - observed)}")
    if bool(observed) == bool(matrix.runtime_entry(key)):
        problems.append(f"reruns {sorted(observed)}")
    return problems


def test_the_job_graphs_follow_the_declared_stages(graphs):
    """Every job reads only the outputs of stages its stage declares (``after``): the
    declared closure is the real one."""
    stages = matrix.stages()
    for name, (_, graph) in graphs.items():
        assert {j.stage for j in graph.values()} - {"all"} <= set(stages), name
        for job in graph.values():
            if job.stage == "all":
                continue
            ups = {graph[k].stage for k in job.after}
            assert ups <= set(stages[job.stage].after), (name, job.stage, ups)


def test_the_declared_rule_order_is_the_job_graphs(graphs):
    """reruns.RULES's ``after`` (the stages each rule reads) is a copy of the rule graph
    that the plan's inputs and the rules' outputs make: over the study configs, the
    stages each rule's jobs read are exactly the declared ones, so the copy cannot drift
    from the workflow either way."""
    read: dict[str, set[str]] = {name: set() for name in matrix.RULES}
    for _, graph in graphs.values():
        for job in graph.values():
            if job.stage in read:
                read[job.stage] |= {graph[k].stage for k in job.after}
    declared = {name: set(stage.after) for name, stage in matrix.RULES.items()}
    assert read == declared


def test_each_key_reruns_exactly_its_declared_dependents(graphs):
    wrong = []
    for key, (scenario, edit) in CHANGES.items():
        workdir, before = graphs[scenario]
        config = copy.deepcopy(SCENARIOS[scenario])
        edit(config)
        write_config(workdir, config)
        try:
            after = jobs(workdir)
        except (Exception, SystemExit) as exc:  # an invalid change: name it, go on
            wrong.append(f"{key} ({scenario}): {exc}")
            continue
        finally:
            write_config(workdir, SCENARIOS[scenario])
        wrong += [f"{key} ({scenario}): {p}" for p in _check(key, edit.path, before, after)]
    assert not wrong, "\n".join(wrong)


def test_the_docs_show_the_current_matrix(schema):
    text = (REPO / "docs" / "workflow.md").read_text()
    assert matrix.matrix_markdown(schema) in text, (
        "docs/workflow.md's invalidation matrix is stale: regenerate it with "
        "`python -m vqarobust.reruns docs/workflow.md`"
    )


def test_runtime_keys_reach_no_params():
    """The download switches and planning hints are out of every job's params: the model
    spec leaves them out, and the encoder jobs carry them in the runtime channel."""
    from vqarobust.params import answer_spec

    entry = {"family": "blip", "path_or_id": "x", "allow_download": True, "gpu_memory_gb": 3}
    assert answer_spec(entry) == answer_spec({"family": "blip", "path_or_id": "x"})


def test_scope_and_matching_by_hand():
    assert matrix.scope("models.vilt.train.epochs") == {"model": "vilt"}
    assert matrix.scope("features.sight.kind") == {"feature": "sight"}
    assert matrix.scope("text.sentence.formal.model") == {"sentence": "formal"}
    assert matrix.scope("dataset.train_n_images") == {"split": "train"}
    assert matrix.scope("corruptions") == {}
    assert matrix.matches("vre.preferences", "vre.preferences.first_drop")
    assert not matrix.matches("vre.pref", "vre.preferences.first_drop")
    assert matrix.readers("models.*.batch_size") == []  # the runtime channel
    # The issue's example: the context analysis at k', the assembly and the report.
    assert matrix.dependents("context.reliance_k") == [
        "analyze:context_at_k",
        "load_duckdb",
        "render_report",
    ]
