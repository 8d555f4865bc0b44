"""Input functions and params of rules/text.smk (question perturbations, rewrites, basic
questions and VQABQ's chain).

Every method taking ``wildcards`` is a Snakemake input function, param or resource of one
rule; the values are exactly those the rules had before the plan (a changed param would
rerun users' jobs), ``canonical()`` wrapping included.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from vqarobust import text
from vqarobust.models import generative_families
from vqarobust.params import canonical
from vqarobust.runtime import Runtime

if TYPE_CHECKING:
    from vqarobust.plan.study import StudyPlan

# A rewriter's batch and whether it may download: they never change a rewrite.
SENTENCE_RUNTIME = ("batch_size", "allow_download")


class TextStage:
    """What the text rules read from the plan: perturbation and rewrite params, the
    basic-question pool and rankings, and VQABQ's chained question sets."""

    def __init__(self, plan: StudyPlan) -> None:
        self.plan = plan
        self.config = plan.config

    # Question perturbations ------------------------------------------------------------

    def text_params(self, wildcards: Any) -> Any:
        """The similarity filter's settings, only those that can change the questions."""
        t = self.config["text"]
        # A perturbation of a level the filter leaves alone is unfiltered, as with it off.
        filtered = text.level(wildcards.perturbation) in t["filter_levels"]
        params = {
            "min_similarity": t["min_similarity"] if filtered else None,
            "max_tries": t["max_tries"],
        }
        if params["min_similarity"] is not None:
            # Only a filter that runs can drop a question or use another encoder.
            params |= {k: t[k] for k in ("on_low_similarity", "similarity_encoder")}
        return canonical(params)

    def text_rates(self, wildcards: Any) -> Any:
        """How much a perturbation changes per severity (vqarobust.text.tokens.Rates)."""
        t = self.config["text"]
        return canonical({k: t[k] for k in ("word_share", "char_share", "char_min_length")})

    # Sentence rewrites -----------------------------------------------------------------

    def _sentence(self, wildcards: Any) -> dict[str, Any]:
        return self.config["text"]["sentence"][wildcards.sentence]

    def sentence_params(self, wildcards: Any) -> Any:
        """What can change a rewrite: the models, prompts and generation length."""
        settings = dict(self._sentence(wildcards))
        for key in SENTENCE_RUNTIME:
            settings.pop(key, None)
        return canonical(settings)

    def sentence_sampled(self, wildcards: Any) -> Any:
        """A rewrite's seed (a sampled one's) and fidelity filter (where the filter runs
        on sentences). A greedy rewrite has no seed; without the filter it has neither,
        as before greedy rewrites were filtered (its params are unchanged)."""
        t = self.config["text"]
        fidelity = {}
        if t["min_similarity"] is not None and "sentence" in t["filter_levels"]:
            keys = ("min_similarity", "max_tries", "on_low_similarity", "similarity_encoder")
            fidelity = {k: t[k] for k in keys}
            if self._sentence(wildcards).get("sampling") is None:
                # Scored once (a redraw repeats a greedy rewrite): max_tries cannot change it.
                del fidelity["max_tries"]
        if self._sentence(wildcards).get("sampling") is None:
            return canonical({"fidelity": fidelity}) if fidelity else {}
        return canonical({"seed": self.config["seed"], "fidelity": fidelity})

    def sentence_runtime(self, wildcards: Any) -> Runtime:
        """The rewriter's batch and download switch: they reach the job, never its params."""
        settings = self._sentence(wildcards)
        return Runtime({k: settings[k] for k in SENTENCE_RUNTIME if k in settings})

    def sentence_gpus(self, wildcards: Any) -> int:
        """One GPU for a rewriter that runs on CUDA."""
        return 1 if self._sentence(wildcards).get("device") == "cuda" else 0

    # Basic questions -------------------------------------------------------------------

    @functools.cached_property
    def _encoder_identity(self) -> Any:
        # Hashing a local encoder's files is costly: once per plan, not once per job.
        return canonical(text.encoder.identity(self.plan.bq["encoder"]))

    def encoder_params(self, wildcards: Any) -> Any:
        """The sentence encoder's identity: what can change any embedding."""
        return self._encoder_identity

    @property
    def encoder_runtime(self) -> Runtime:
        """Whether the encoder may download: it never changes an embedding."""
        return Runtime({"allow_download": self.plan.bq["allow_download"]})

    def pool_input(self, wildcards: Any) -> list[str]:
        """The pool tables (one per source, each encoded once)."""
        return [
            f"results/{self.plan.dataset}/questions/pool/{source}.parquet"
            for source in self.plan.pool_sources
        ]

    def pool_source_input(self, wildcards: Any) -> dict[str, Any]:
        """One pool source's questions: a prepared split's, or a pool file (and its
        annotations) relative to the working directory."""
        spec = self.plan.pool_sources[wildcards.source]
        dataset = self.plan.dataset
        if spec["split"] is not None:
            return {"questions": f"resources/datasets/{dataset}/{spec['split']}/questions.parquet"}
        inputs = {"questions": self.plan.user_path(spec["questions"])}
        if spec["annotations"]:
            inputs["annotations"] = self.plan.user_path(spec["annotations"])
        return inputs

    def ranking_params(self, wildcards: Any) -> Any:
        """The settings that can change one ranker's rankings."""
        bq = self.plan.bq
        # Only the LASSO ranker reads its mode, alpha, lambda and pre-filter.
        # exclude_main only when not the default, so that existing rankings keep their params.
        base = {"k": bq["k"]} | (
            {"exclude_main": bq["exclude_main"]} if bq["exclude_main"] != "own" else {}
        )
        name = text.ranking.ranker_name(wildcards.ranker)
        if name.startswith("bleu"):
            return canonical(base | {"bleu_smoothing": bq["bleu_smoothing"]})
        if name != "lasso":
            return canonical(base)
        lasso = bq["lasso"]
        keys = base | {"lasso_mode": lasso["mode"]}
        if lasso["mode"] == "paper":
            keys["lasso_lambda"] = lasso["lambda"]
        else:
            keys |= {"lasso_alpha": bq["lasso_alpha"], "prefilter": bq["prefilter"]}
        return canonical(keys)

    # VQABQ's chain ---------------------------------------------------------------------

    def chain_sets(self, model: str) -> list[str]:
        """One model's chained question sets, by how many basic questions they prepend."""
        folder = f"results/{self.plan.dataset}/questions/{self.plan.chain}/{model}"
        return [f"{folder}/{n}.parquet" for n in self.plan.vqabq_n]

    def chain_input(self, wildcards: Any) -> dict[str, str]:
        """The questions and the rankings of the ranker VQABQ uses."""
        ranker = self.plan.bq["vqabq"]["ranker"]
        return {
            "questions": self.plan.questions,
            "rankings": f"results/{self.plan.dataset}/questions/rankings/{ranker}.parquet",
        }

    def chain_prompt(self, wildcards: Any) -> str:
        """A generative or chat model's chain_prompt, else the direct concatenation."""
        entry = self.config["models"][wildcards.model]
        if entry["family"] not in generative_families():
            return text.ranking.CONCAT_PROMPT
        return entry.get("chain_prompt", text.ranking.DEFAULT_CHAIN_PROMPT)
