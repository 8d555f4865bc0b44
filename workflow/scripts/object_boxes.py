"""Snakemake adapter: the object boxes of the eval images (datasets.object_boxes)."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.datasets.object_boxes import write_boxes
from vqarobust.jobs import start_job

start_job(snakemake.log[0])
write_boxes(
    snakemake.input.questions,
    snakemake.output[0],
    sources={k: v for k, v in snakemake.input.items() if k != "questions"},
    **snakemake.params.settings,
)
