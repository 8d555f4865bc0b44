"""Snakemake adapter: train the detector-like object encoder of a scenes feature source."""

from vqarobust.warm import hand_over

hand_over(snakemake)  # a local run's warm process runs the rest (docs/workflow.md, "Warm start")

from vqarobust.features.detector import DetectorRecipe, train_detector
from vqarobust.jobs import start_job

start_job(snakemake.log[0])
settings = dict(snakemake.params.settings)
recipe = DetectorRecipe.take(settings)
train_detector(snakemake.input.images, snakemake.output[0], recipe, **settings)
