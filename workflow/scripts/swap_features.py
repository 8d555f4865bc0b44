"""Snakemake adapter: the feature-level SwapMix swaps of one feature source."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.jobs import start_job
from vqarobust.materialize.context import SwapOutputs
from vqarobust.materialize.feature_context import FeatureSwapSettings, swap_features

start_job(snakemake.log[0])
settings = dict(snakemake.params.settings)
settings.pop("word_vectors")  # named in params for reruns; a file is an input
sets = dict(zip(settings.pop("perturbations"), snakemake.output.sets, strict=True))
swap_features(
    snakemake.input.questions,
    snakemake.input.features,
    SwapOutputs(snakemake.output.swaps, sets),
    FeatureSwapSettings(**settings),
    word_vectors_path=snakemake.input.get("word_vectors"),
    gqa_questions=snakemake.input.get("gqa_questions"),
    scene_graphs=snakemake.input.get("scene_graphs"),
)
