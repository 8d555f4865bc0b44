"""Snakemake adapter: one basic-question pool source, deduplicated and encoded."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from functools import partial

import torch

from vqarobust.jobs import start_job
from vqarobust.materialize.questions import build_pool
from vqarobust.text.encoder import encode

start_job(snakemake.log[0], allow_download=snakemake.params.runtime["allow_download"])
torch.set_num_threads(snakemake.threads)
encoder = partial(
    encode,
    path=snakemake.params.encoder_path,
    allow_download=snakemake.params.runtime["allow_download"],
)
build_pool(
    snakemake.input.questions,
    snakemake.output[0],
    annotations=snakemake.input.get("annotations"),
    encode=encoder,
)
