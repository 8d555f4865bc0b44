"""Snakemake adapter: the feature-level SwapMix swaps of one feature source."""

from vqarobust.logs import setup_logging
from vqarobust.materialize.feature_context import swap_features

setup_logging(snakemake.log[0])
settings = dict(snakemake.params.settings)
settings.pop("word_vectors")  # named in params for reruns; a file is an input
sets = dict(zip(settings.pop("perturbations"), snakemake.output.sets, strict=True))
swap_features(
    snakemake.input.questions,
    snakemake.input.features,
    snakemake.output.swaps,
    sets,
    word_vectors_path=snakemake.input.get("word_vectors"),
    gqa_questions=snakemake.input.get("gqa_questions"),
    scene_graphs=snakemake.input.get("scene_graphs"),
    **settings,
)
