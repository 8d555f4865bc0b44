"""Snakemake adapter: write one text perturbation's question set per severity."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.jobs import start_job
from vqarobust.materialize.questions import Fidelity, perturb_question_set
from vqarobust.text import Rates

start_job(snakemake.log[0])
perturb_question_set(
    snakemake.input.questions,
    dict(zip(snakemake.params.severities, snakemake.output, strict=True)),
    snakemake.wildcards.perturbation,
    global_seed=snakemake.params.seed,
    fidelity=Fidelity.from_params(snakemake.params.fidelity),
    rates=Rates.from_params(snakemake.params.rates),
)
