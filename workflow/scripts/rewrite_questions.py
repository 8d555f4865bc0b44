"""Snakemake adapter: rewrite the questions with one sentence-level perturbation's models."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
import torch

from vqarobust.jobs import start_job
from vqarobust.materialize.questions import Fidelity, rewrite_question_set

start_job(snakemake.log[0], allow_download=snakemake.params.runtime.get("allow_download", False))
torch.set_num_threads(snakemake.threads)
settings = {**snakemake.params.settings, **snakemake.params.runtime.values}
sampled = dict(snakemake.params.sampled)  # a greedy rewrite: no seed; off the filter, empty
rewrite_question_set(
    snakemake.input.questions,
    snakemake.output[0],
    snakemake.wildcards.sentence,
    settings,
    global_seed=sampled.get("seed", 0),
    fidelity=Fidelity.from_params(sampled.get("fidelity", {})),
)
