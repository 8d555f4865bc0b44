"""The study plan: what one validated config asks the workflow to make, as plain data.

Built once from the config (:meth:`StudyPlan.build`), it holds the subset catalogue
(every subset's name, kind, modality, family and severities), the models, and one stage
object per rule file (``plan.corrupt``, ``plan.infer``, ...) whose methods are the rules'
input functions and params. The rule files only call into it, so everything here is
tested in Python without building a DAG (tests/test_plan.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

from vqarobust import perturbations, text
from vqarobust.config import ConfigError, lpips_missing, missing_weights
from vqarobust.corruptions import family, max_severity
from vqarobust.models import family_code_digest, feature_families
from vqarobust.plan.code import (
    combine,
    default_scripts_dir,
    perturbation_digest,
    script_digest,
)
from vqarobust.runtime import Runtime, shard_bytes

# The kinds of subset; each decides where a subset's inputs come from.
KINDS = ("clean", "corruption", "control", "text", "sentence", "ranker", "context", "chain")
# What a value kept by StudyPlan.once is.
R = TypeVar("R")


class PlanError(ConfigError):
    """A config that validates but cannot be planned; the message names the key."""


@dataclass(frozen=True)
class Subset:
    """One subset every model answers: its kind, modality, family and severities
    (``None`` for a context subset, whose swap indices its question set holds)."""

    name: str
    kind: str
    modality: str
    family: str
    severities: tuple[int, ...] | None


def alternatives(names: Iterable[str]) -> str:
    """A wildcard constraint matching exactly ``names``."""
    return "|".join(re.escape(n) for n in names)


def _same(path: str) -> str:
    return path


def _no_parts(plan: StudyPlan, wildcards: Any) -> list[str]:
    return []


def _family(plan: StudyPlan, wildcards: Any) -> list[str]:
    name = plan.config["models"][wildcards.model]["family"]
    digest = plan.once(("family", name), family_code_digest, name)
    return [] if digest is None else [digest]


def _model_job(plan: StudyPlan, wildcards: Any) -> list[str]:
    # A per-model job with an attention table runs vqarobust.attention, which its script
    # imports by name: a per-subset job, which never draws maps, is not rerun by its edits.
    parts = _family(plan, wildcards)
    if plan.infer.per_model and plan.infer.attention_models:
        from vqarobust.code_digest import code_digest
        from vqarobust.inference import ATTENTION_MODULE

        parts.append(plan.once(("module", ATTENTION_MODULE), code_digest, ATTENTION_MODULE))
    return parts


def _registered(plan: StudyPlan, name: str) -> list[str]:
    return list(plan.once(("entry", name), _entry_parts, name))


def _entry_parts(name: str) -> tuple[str, ...]:
    # A sentence rewrite named in the config but not registered runs the rewrite code
    # its script imports, nothing of its own.
    known = name in perturbations.names() or name in text.names(level="sentence")
    return (perturbation_digest(name),) if known else ()


# Rules whose script is named for another rule.
_SCRIPTS = {"extract_image_features": "extract_features"}
# The registered entries each job applies, beyond the code its script imports.
_CODE_PARTS: dict[str, Callable[[StudyPlan, Any], list[str]]] = {
    "corrupt_images": lambda plan, wc: _registered(plan, wc.corruption),
    "perturb_questions": lambda plan, wc: _registered(plan, wc.perturbation),
    "rewrite_questions": lambda plan, wc: _registered(plan, wc.sentence),
    "rank_basic_questions": lambda plan, wc: _registered(plan, wc.ranker),
    "chain_questions": lambda plan, wc: _registered(plan, plan.chain),
    "swap_context": lambda plan, wc: [
        d for p in plan.context_perturbations for d in _registered(plan, p)
    ],
    "swap_features": lambda plan, wc: [
        d for p in plan.context_perturbations for d in _registered(plan, p)
    ],
    "run_model": _model_job,
    "image_attention": _family,
}


class StudyPlan:
    """The plan of one study; see the module's docstring."""

    def __init__(
        self,
        config: Mapping[str, Any],
        user_path: Callable[[str], Any] = _same,
        scripts_dir: str | Path | None = None,
    ) -> None:
        # The rule files pass Snakemake's ``local``: a file the config names is relative
        # to the working directory, never under a module's prefix.
        self.config = config
        self.user_path = user_path
        # The code digests, each computed once: a plan is a snapshot of the code, and
        # Snakemake asks for the same script's and entry's digests at every job.
        self._once: dict[tuple[str, Any], Any] = {}
        self.scripts_dir = Path(scripts_dir) if scripts_dir else default_scripts_dir()
        self.dataset: str = config["dataset"]["name"]
        self.shards: Runtime = shard_bytes(config["storage"])
        self.model_names: list[str] = list(config["models"])
        self._perturbations(config)
        self._basic_questions(config["basic_questions"])
        # SwapMix context perturbations (scenes datasets): severity = the swap's index.
        self.context_perturbations: list[str] = list(config["context"]["perturbations"])
        # Region-feature models (LXMERT) read a feature source instead of pixels.
        readers = feature_families()
        self.feature_models: dict[str, str] = {
            m: config["models"][m]["features"]
            for m in self.model_names
            if config["models"][m]["family"] in readers
        }
        self.feature_sources = sorted(set(self.feature_models.values()))
        self.pixel_models = [m for m in self.model_names if m not in self.feature_models]
        self.catalogue: dict[str, Subset] = self._catalogue()
        self.subsets = [name for name, s in self.catalogue.items() if s.kind != "chain"]
        self._stages()
        unmade = self.unmade_inputs()
        if unmade:
            model, subset, path = unmade[0]
            raise PlanError(
                f"config error at models.{model}: its {subset!r} subset reads {path}, which "
                "no job of this study makes"
            )

    def _perturbations(self, config: Mapping[str, Any]) -> None:
        """The image corruptions, controls, text perturbations and rewrites that run
        here, and those skipped with their reasons."""
        # With missing_weights: skip, stylize, sentence rewrites whose weights are not here
        # and the filtered text perturbations without the filter's encoder are left out,
        # each with its reason (in the summary and the report).
        self.skipped_weights: dict[str, str] = missing_weights(config)
        # LPIPS is a score, not a perturbation: without its weights it is off, said at start.
        self.skipped_lpips: str | None = (
            lpips_missing(config["lpips"]) if config["missing_weights"] == "skip" else None
        )
        self.corruptions = [c for c in config["corruptions"] if c not in self.skipped_weights]
        # Controls (the blank images) run like corruptions at their one severity;
        # load_duckdb keeps them out of the robustness metrics.
        self.controls: list[str] = list(config["controls"])
        self.severities: list[int] = sorted(set(config["severities"]) - {0})
        # Text perturbations that cannot run here (WordNet's without WordNet) are skipped.
        self.skipped_text = {
            name: text.wordnet.missing_message()
            for name in config["text"]["perturbations"]
            if name not in text.names(available=True)
        }
        # With missing_weights: skip, those under a fidelity filter whose encoder is not
        # here are left out too (skipped_weights).
        left_out = self.skipped_text | self.skipped_weights
        self.text_perturbations = [p for p in config["text"]["perturbations"] if p not in left_out]
        self.sentence = [n for n in config["text"]["sentence"] if n not in self.skipped_weights]
        if not self.corruptions and not self.text_perturbations:
            skipped = ", ".join(self.skipped_weights) or "WordNet"
            raise PlanError(
                "config error at missing_weights: the VRE suite needs image corruptions or "
                f"text perturbations, and with {skipped} skipped none is left"
            )

    def _basic_questions(self, bq: Mapping[str, Any]) -> None:
        """The rankers that run here (every ranker on every basic-question dataset:
        bq_* on the general pool, ynbq_* on its yes/no questions; METEOR needs WordNet),
        the pool sources, the noise levels and VQABQ's chain."""
        self.bq = bq
        every = [
            text.ranking.perturbation_name(r, d) for d in bq["datasets"] for r in bq["rankers"]
        ]
        self.skipped_rankers = {
            n: text.wordnet.missing_message()
            for n in every
            if text.ranking.needs(n) == "wordnet" and text.wordnet_dir() is None
        }
        self.rankers = [n for n in every if n not in self.skipped_rankers]
        if bq["vqabq"]["enabled"] and bq["vqabq"]["ranker"] in self.skipped_rankers:
            raise PlanError(
                f"config error at basic_questions.vqabq.ranker: {bq['vqabq']['ranker']} "
                f"cannot run here ({text.wordnet.missing_message()}); choose another ranker"
            )
        self.pool_sources = text.pools.pool_sources(bq["pool"], bq["pool_files"])
        # VQABQ asks every model each main question with its first 1, 2 and 3 basic
        # questions (one more subset, severity n).
        self.chain: str = text.ranking.CHAIN
        self.chain_models = list(self.model_names) if bq["vqabq"]["enabled"] else []
        self.vqabq_n = list(range(1, text.ranking.PER_LEVEL + 1))
        self.bq_levels = list(range(1, bq["k"] // 3 + 1))

    @classmethod
    def build(
        cls,
        config: Mapping[str, Any],
        user_path: Callable[[str], Any] = _same,
        scripts_dir: str | Path | None = None,
    ) -> StudyPlan:
        """The plan of a validated config (:func:`vqarobust.config.validate_config`);
        ``scripts_dir`` holds the workflow's scripts, whose imports the code params
        digest."""
        return cls(config, user_path, scripts_dir)

    def _stages(self) -> None:
        # Imported here: each stage module imports this one for its type.
        from vqarobust.plan.analyze import AnalyzeStage
        from vqarobust.plan.context import ContextStage
        from vqarobust.plan.corrupt import CorruptStage
        from vqarobust.plan.datasets import DatasetsStage
        from vqarobust.plan.export import ExportStage
        from vqarobust.plan.features import FeaturesStage
        from vqarobust.plan.infer import InferStage
        from vqarobust.plan.models import ModelsStage
        from vqarobust.plan.text import TextStage

        self.datasets = DatasetsStage(self)
        self.models = ModelsStage(self)
        self.corrupt = CorruptStage(self)
        self.text = TextStage(self)
        self.context = ContextStage(self)
        self.features = FeaturesStage(self)
        self.infer = InferStage(self)
        self.analyze = AnalyzeStage(self)
        self.export = ExportStage(self)

    # The subset catalogue ----------------------------------------------------------

    def _catalogue(self) -> dict[str, Subset]:
        out = {"clean": Subset("clean", "clean", "clean", "clean", (0,))}
        for name in self.corruptions:
            sev = tuple(self.corruption_severities(name))
            out[name] = Subset(name, "corruption", "image", family(name), sev)
        for name in self.controls:
            out[name] = Subset(name, "control", "image", family(name), (max_severity(name),))
        for name in self.text_perturbations:
            out[name] = Subset(name, "text", "text", text.level(name), tuple(self.severities))
        # A sentence rewrite is named in the config, not registered: text, one level.
        for name in self.sentence:
            out[name] = Subset(name, "sentence", "text", text.level(name), (1,))
        for name in self.rankers:
            out[name] = Subset(
                name,
                "ranker",
                perturbations.modality(name),
                text.ranking.ranker_family(name),
                tuple(self.bq_levels),
            )
        for name in self.context_perturbations:
            out[name] = Subset(name, "context", "context", "context", None)
        if self.chain_models:
            out[self.chain] = Subset(
                self.chain,
                "chain",
                perturbations.modality(self.chain),
                "vqabq",
                tuple(self.vqabq_n),
            )
        return out

    def made_paths(self) -> set[str]:
        """Every file or folder a job of this study makes that inference may read."""
        d = self.dataset
        made = {
            f"resources/datasets/{d}/{split}/{name}"
            for split in ("train", "eval")
            for name in ("questions.parquet", "images", "dataset.json")
        }
        made |= {self.image_folder(p, s) for p, s in self.image_subsets()}
        names = [*self.text_perturbations, *self.sentence, *self.rankers]
        made |= {path for name in names for path in self.question_sets(name)}
        made |= {path for m in self.chain_models for path in self.text.chain_sets(m)}
        folders = [f"results/{d}/context"]
        folders += [f"results/{d}/context/features/{s}" for s in self.feature_sources]
        for folder in folders:
            made |= {f"{folder}/{p}.parquet" for p in self.context_perturbations}
            made |= {f"{folder}/swaps.parquet", f"{folder}/images"}
        levels = [(c, s) for c in self.corruptions for s in self.corruption_severities(c)]
        levels += [(c, max_severity(c)) for c in self.controls]
        for source in self.config["features"]:
            made |= {self.features.feature_path(source, split) for split in ("train", "eval")}
            made |= {self.features.image_feature_path(source, c, s) for c, s in levels}
        made |= {self.models.model_dir(m) or "" for m in self.model_names}
        return made

    def unmade_inputs(self) -> list[tuple[str, str, str]]:
        """(model, subset, path) of every inference input in the workflow's own folders
        that no job of this study makes; empty for a plan that can run."""
        made = self.made_paths()
        missing = []
        for model in self.model_names:
            chain = [self.chain] if model in self.chain_models else []
            for subset in [*self.subsets, *chain]:
                wildcards = SimpleNamespace(dataset=self.dataset, model=model, subset=subset)
                inputs = self.infer.infer_input(wildcards)
                if self.models.model_dir(model) is None:
                    # A checkpoint folder the entry names is the user's, wherever it is.
                    inputs.pop("model", None)
                for value in inputs.values():
                    for path in [value] if isinstance(value, str) else value:
                        own = str(path).startswith(("results/", "resources/"))
                        if own and str(path) not in made:
                            missing.append((model, subset, str(path)))
        return missing

    def subset(self, name: str) -> Subset:
        """The catalogue's entry of ``name``."""
        return self.catalogue[name]

    def corruption_severities(self, name: str) -> list[int]:
        """The configured severities a corruption has (a one-level corruption runs at 1)."""
        return [s for s in self.severities if s <= max_severity(name)]

    def question_sets(self, name: str) -> list[str]:
        """The perturbed question sets of one text perturbation or ranker, by level."""
        levels = (
            self.bq_levels
            if name in self.rankers
            else [1]
            if name in self.sentence
            else self.severities
        )
        return [f"results/{self.dataset}/questions/{name}/{level}.parquet" for level in levels]

    def image_subsets(self) -> list[tuple[str, int]]:
        """(perturbation, severity) of every image folder; none when the dataset is read
        without images (GQA for feature models only)."""
        dataset = self.config["dataset"]
        if dataset["adapter"] == "gqa" and not dataset.get("images"):
            return []
        pairs = [("clean", 0)]
        pairs += [(c, s) for c in self.corruptions for s in self.corruption_severities(c)]
        pairs += [(c, max_severity(c)) for c in self.controls]
        return pairs

    def image_folder(self, perturbation: str, severity: int) -> str:
        """The folder of one image subset (the clean split's for ``clean``)."""
        if perturbation == "clean":
            return f"resources/datasets/{self.dataset}/eval/images"
        return f"results/{self.dataset}/images/{perturbation}/{severity}"

    @property
    def questions(self) -> str:
        """The eval split's questions, which almost every job reads."""
        return f"resources/datasets/{self.dataset}/eval/questions.parquet"

    # What the rule files share ---------------------------------------------------------

    def code(self, rule: str) -> Callable[[Any], str]:
        """The ``code`` param of ``rule``'s jobs: the digest of the package code its
        script imports, with the entries each job applies (:mod:`vqarobust.plan.code`)."""
        script = self.scripts_dir / f"{_SCRIPTS.get(rule, rule)}.py"
        if not script.is_file():
            raise PlanError(f"rule {rule!r} has no script {script}")
        parts = _CODE_PARTS.get(rule, _no_parts)

        def digest(wildcards: Any) -> str:
            own = self.once(("script", script), script_digest, script)
            return combine(own, parts(self, wildcards))

        return digest

    def once(self, key: tuple[str, Any], compute: Callable[..., R], *args: Any) -> R:
        """``compute(*args)``, computed the first time ``key`` is asked for in this plan."""
        if key not in self._once:
            self._once[key] = compute(*args)
        return self._once[key]

    def refresh_code(self) -> None:
        """Forget the code digests: the next job asked for digests the package's files as
        they are then (a notebook or test that edits code and keeps its plan)."""
        self._once.clear()

    def wildcard_constraints(self) -> dict[str, str]:
        """Each wildcard's alternatives: only the names this study plans."""
        return {
            "dataset": re.escape(self.dataset),
            "split": "train|eval",
            "model": alternatives(self.model_names),
            "corruption": alternatives([*self.corruptions, *self.controls]),
            "perturbation": alternatives(self.text_perturbations or ["-"]),
            "sentence": alternatives(self.sentence or ["-"]),
            "ranker": alternatives(self.rankers or ["-"]),
            "source": alternatives(self.pool_sources or ["-"]),
            "feature": alternatives(list(self.config["features"]) or ["-"]),
            "subset": alternatives([*self.subsets, self.chain]),
            "severity": "[1-9]",
        }

    def final_outputs(self, wildcards: Any = None) -> list[str]:
        """What a plain ``snakemake`` makes: the database, the report and every
        basic-question dataset."""
        exported = [
            f"results/{self.dataset}/basic_questions/{r}.{ext}"
            for r in self.rankers
            for ext in ("parquet", "json")
        ]
        return [
            f"results/{self.dataset}/robustness.duckdb",
            f"results/{self.dataset}/report/index.html",
            *exported,
        ]

    def skipped_messages(self) -> list[str]:
        """What the run leaves out, a line each (said at start, dry runs too)."""
        lines = []
        if self.skipped_text:
            names = ", ".join(self.skipped_text)
            lines.append(f"Skipping text perturbations {names}: {text.wordnet.missing_message()}")
        if self.skipped_rankers:
            names = ", ".join(self.skipped_rankers)
            lines.append(
                f"Skipping basic-question rankers {names}: {text.wordnet.missing_message()}"
            )
        for name, reason in self.skipped_weights.items():
            lines.append(f"Skipping {name} (missing_weights: skip): {reason}")
        if self.skipped_lpips is not None:
            lines.append(f"Skipping LPIPS (missing_weights: skip): {self.skipped_lpips}")
        return lines

    @functools.cached_property
    def skipped(self) -> dict[str, str]:
        """Every perturbation the study leaves out here, with its reason."""
        return self.skipped_text | self.skipped_rankers | self.skipped_weights
