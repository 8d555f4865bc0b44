"""Snakemake adapter: encode every distinct question of the eval split and the pool once."""

import torch

from vqarobust.logs import setup_logging
from vqarobust.materialize.questions import embed_questions

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
embed_questions([snakemake.input.questions, *snakemake.input.pool], snakemake.output[0])
