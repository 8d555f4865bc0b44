"""Snakemake adapter: train the detector-like object encoder of a scenes feature source."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.features.detector import DetectorRecipe, train_detector
from vqarobust.jobs import start_job

start_job(snakemake.log[0])
settings = dict(snakemake.params.settings)
recipe = DetectorRecipe.take(settings)
train_detector(snakemake.input.images, snakemake.output[0], recipe, **settings)
