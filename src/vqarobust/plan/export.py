"""The export stage of the study plan: rules/export.smk's ``export_huggingface``, which
writes every subset of the run as one Hugging Face dataset with lmms-eval tasks
(:mod:`vqarobust.hf_export`), on demand (``snakemake hf_dataset``), and what its dataset
card says of each subset (:func:`card_facts`: computed here, where the plan is, and
handed to the job as a param)."""

from __future__ import annotations

import ast
import functools
import inspect
import json
import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from vqarobust import perturbations, plugins

if TYPE_CHECKING:
    from vqarobust.hf_export import Exported
    from vqarobust.plan.study import StudyPlan

# The Hub's licence id and the line the card gives, per dataset adapter.
LICENSES: dict[str, tuple[str, str]] = {
    "easy-vqa": ("mit", "easy-VQA (the `easy-vqa` package by Victor Zhou): MIT licence"),
    "vqav2": (
        "other",
        "VQA v2 questions and answers: CC BY 4.0 (the VQA Consortium); images: MS COCO, "
        "each under the Flickr terms of use of its photo",
    ),
    "gqa": (
        "other",
        "GQA questions and Visual Genome images: under the GQA and Visual Genome terms of use",
    ),
    "scenes": ("mit", "synthetic scenes rendered by vqarobust's `scenes` adapter: MIT licence"),
    "jsonl": ("unknown", "the source's own licence (not known to vqarobust: give --license)"),
    "hf": ("unknown", "the source dataset's own licence (not known to vqarobust: give --license)"),
}
# The producing rule of each subset kind (its job's code param is the subset's digest).
_RULES: dict[str, tuple[str, ...]] = {
    "clean": ("prepare_dataset",),
    "corruption": ("corrupt_images",),
    "control": ("corrupt_images",),
    "text": ("perturb_questions",),
    "sentence": ("rewrite_questions",),
    "ranker": ("rank_basic_questions", "noise_questions"),
    "context": ("swap_context",),
}


class ExportStage:
    """What ``export_huggingface`` reads and what its card says."""

    def __init__(self, plan: StudyPlan) -> None:
        self.plan = plan

    @functools.cached_property
    def _entries(self) -> dict[str, Any]:
        return plan_entries(self.plan)

    def entries(self, wildcards: Any) -> dict[str, Any]:
        """The subsets to export and those left out (:func:`plan_entries`)."""
        return self._entries

    def facts(self, wildcards: Any) -> dict[str, Any]:
        """What the card says (:func:`card_facts`): a change reruns the export."""
        return card_facts(self.plan)

    def export_input(self, wildcards: Any) -> dict[str, Any]:
        """The questions, the prepared split's description, and every image folder and
        question set of the exported subsets."""
        plan = self.plan
        files = []
        for entry in self._entries["subsets"]:
            if "question_set" in entry:
                files += [entry["images"], entry["question_set"]]
            for _, images, questions in entry.get("levels", []):
                files += [images] + ([questions] if questions else [])
        return {
            "questions": plan.questions,
            "info": f"resources/datasets/{plan.dataset}/eval/dataset.json",
            "subsets": list(dict.fromkeys(files)),
        }


def severity_table(func: Callable[..., Any]) -> tuple[list[str], list[str]] | None:
    """The parameter names and each severity's values of a perturbation whose body picks
    them as ``a, b = (row1, row2, ...)[severity - 1]`` (the engine's convention, the
    first such statement); None for one that does not."""
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        return None
    tree = ast.parse(source).body[0]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript)):
            continue
        table, index = node.value.value, ast.unparse(node.value.slice)
        if not isinstance(table, ast.Tuple) or index.replace(" ", "") != "severity-1":
            continue
        target = node.targets[0]
        names = [ast.unparse(t) for t in getattr(target, "elts", [target])]
        return names, [ast.unparse(row) for row in table.elts]
    return None


def _summary(func: Any) -> str:
    """The first sentence of a docstring, on one line."""
    doc = " ".join((inspect.getdoc(func) or "").split())
    return doc.split(". ")[0].rstrip(".") + "." if doc else ""


def _digests(plan: StudyPlan, kind: str, name: str) -> dict[str, str]:
    """The code param of each job that made the subset (or why it cannot be given)."""
    from vqarobust.plan.study import PlanError

    first = (plan.subset(name).severities or (1,))[0]
    wildcards = SimpleNamespace(
        dataset=plan.dataset,
        split="eval",
        corruption=name,
        severity=str(first),
        perturbation=name,
        sentence=name,
        ranker=name,
    )
    out = {}
    for rule in _RULES.get(kind, ()):
        try:
            out[rule] = plan.code(rule)(wildcards)
        except PlanError as exc:  # an installed package without the workflow's scripts
            out[rule] = f"unknown ({exc})"
    return out


def _params(plan: StudyPlan, kind: str, name: str) -> dict[str, Any]:
    """The settings that made the subset: its job's params that can change it."""
    wc = SimpleNamespace(dataset=plan.dataset, corruption=name, perturbation=name, ranker=name)
    wc.sentence = name
    if kind in ("corruption", "control"):
        return {
            "encoding": plan.corrupt.image_encoding(wc),
            "options": plan.corrupt.corruption_options(wc),
            "style": plan.corrupt.stylize_params(wc),
        }
    if kind == "text":
        return {"rates": plan.text.text_rates(wc), "fidelity": plan.text.text_params(wc)}
    if kind == "sentence":
        return {"rewrite": plan.text.sentence_params(wc)}
    if kind == "ranker":
        return {"ranking": plan.text.ranking_params(wc), "levels": list(plan.bq_levels)}
    if kind == "context":
        return {"swaps": plan.context.context_params(wc)}
    return {}


def perturbation_facts(plan: StudyPlan, name: str) -> dict[str, Any]:
    """What the card says of one subset: what it does, its family, where it comes from,
    its severity table, the settings and the code digests of the jobs that made it."""
    subset = plan.subset(name)
    facts: dict[str, Any] = {
        "kind": subset.kind,
        "modality": subset.modality,
        "family": subset.family,
        "params": json.loads(json.dumps(_params(plan, subset.kind, name), default=str)),
        "code": _digests(plan, subset.kind, name),
    }
    if name in perturbations.names():
        entry = perturbations.entry(name)
        facts["description"] = _summary(entry.obj)
        facts["source"] = f"{plugins.describe(entry.origin)} ({entry.origin})"
        table = severity_table(entry.obj)
        if table is not None:
            facts["severity_table"] = {"names": table[0], "rows": table[1]}
    elif subset.kind == "clean":
        facts["description"] = "The prepared evaluation split, unperturbed."
        facts["source"] = "the dataset adapter"
    else:
        facts["description"] = "A sentence-level rewrite named in the config (docs/text.md)."
        facts["source"] = "the config's text.sentence entry"
    return facts


def card_facts(plan: StudyPlan) -> dict[str, Any]:
    """Everything the card says that comes from the plan, as plain data."""
    from vqarobust.provenance import package_version

    adapter = plan.config["dataset"]["adapter"]
    names = [n for n, s in plan.catalogue.items() if s.kind != "chain"]
    encoding = {k: plan.config["storage"][k] for k in ("image_format", "jpeg_quality")}
    return {
        "dataset": plan.dataset,
        "adapter": adapter,
        "license": list(LICENSES.get(adapter, ("unknown", "the source's own licence"))),
        "seed": plan.config["seed"],
        "encoding": encoding,
        "version": package_version("vqarobust"),
        "questions": plan.questions,
        "dataset_info": f"resources/datasets/{plan.dataset}/eval/dataset.json",
        "perturbations": {n: perturbation_facts(plan, n) for n in names},
    }


def plan_entries(plan: StudyPlan) -> dict[str, Any]:
    """The plan's subsets as plain data: ``subsets`` (name, kind, modality, severities,
    image folders and question sets per severity; a context subset's severities are its
    question set's swap indices, read when exporting) and ``left_out`` (name -> why)."""
    subsets: list[dict[str, Any]] = []
    left_out: dict[str, str] = {}
    if not plan.image_subsets():
        return {"subsets": [], "left_out": {"*": "the dataset is read without images"}}
    clean = plan.image_folder("clean", 0)
    for name, subset in plan.catalogue.items():
        entry = {"name": name, "kind": subset.kind, "modality": subset.modality}
        if subset.kind == "chain":
            left_out[name] = "its question sets are each model's own chain prompts"
        elif subset.kind == "context":
            if not plan.pixel_models:
                left_out[name] = "no model reads pixels, so no swapped image is made"
                continue
            folder = f"results/{plan.dataset}/context"
            entry |= {"images": f"{folder}/images", "question_set": f"{folder}/{name}.parquet"}
            subsets.append(entry)
        elif subset.kind == "clean":
            subsets.append(entry | {"levels": [[0, clean, None]]})
        elif subset.kind in ("corruption", "control"):
            levels = [[s, plan.image_folder(name, s), None] for s in subset.severities or ()]
            subsets.append(entry | {"levels": levels})
        else:  # text, sentence, ranker: perturbed questions about the clean images
            sets = plan.question_sets(name)
            levels = [[s, clean, q] for s, q in zip(subset.severities or (), sets, strict=True)]
            subsets.append(entry | {"levels": levels})
    return {"subsets": subsets, "left_out": left_out}


def export_run(
    results: str | os.PathLike[str],
    out: str | os.PathLike[str],
    configfile: str | os.PathLike[str] | None = None,
    license_id: str | None = None,
    dataset_path: str | None = None,
) -> Exported:
    """:func:`~vqarobust.hf_export.export_dataset` of a finished run's
    ``results/<dataset>`` folder, its subsets those of the run's config (``configfile``,
    by default the run's ``config/config.yaml``); ``license_id`` replaces the source's
    licence (a Hub id)."""
    from vqarobust.config import load_config
    from vqarobust.hf_export import export_dataset
    from vqarobust.plan.study import StudyPlan

    folder = Path(results).resolve()
    if folder.parent.name != "results":
        raise ValueError(f"{results} is no run's results/<dataset> folder")
    root = folder.parents[1]
    config = load_config(configfile or root / "config" / "config.yaml")
    if folder.name != config["dataset"]["name"]:
        raise ValueError(
            f"{results} is not the results folder of the config's dataset "
            f"{config['dataset']['name']!r}"
        )
    plan = StudyPlan.build(config)
    facts = card_facts(plan)
    if license_id is not None:
        facts["license"] = [license_id, f"`{license_id}` (given when exporting)"]
    entries = plan_entries(plan)
    missing = [
        path
        for s in entries["subsets"]
        for path in [s.get("question_set"), *(p for _, i, q in s.get("levels", []) for p in (i, q))]
        if path is not None and not (root / path).exists()
    ]
    if missing:
        raise FileNotFoundError(
            f"the run in {root} has not made {missing[0]} (and {len(missing) - 1} more "
            "inputs): run the workflow first (`snakemake`)"
        )
    return export_dataset(entries, facts, root, out, dataset_path)
