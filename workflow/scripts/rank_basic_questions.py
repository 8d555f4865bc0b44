"""Snakemake adapter: rank the basic questions of every distinct question, per ranker."""

import torch

from vqarobust.logs import setup_logging
from vqarobust.materialize.questions import rank_basic_questions

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
ranking = dict(snakemake.params.ranking)
rank_basic_questions(
    snakemake.input.questions,
    list(snakemake.input.pool),
    snakemake.output[0],
    rankers=ranking["rankers"],
    k=ranking["k"],
    alpha=ranking["lasso_alpha"],
    prefilter=ranking["prefilter"],
)
