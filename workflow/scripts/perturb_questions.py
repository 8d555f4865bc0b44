"""Snakemake adapter: write one text perturbation's question set per severity."""

from vqarobust.logs import setup_logging
from vqarobust.materialize.questions import Fidelity, perturb_question_set
from vqarobust.text import Rates

setup_logging(snakemake.log[0])
perturb_question_set(
    snakemake.input.questions,
    dict(zip(snakemake.params.severities, snakemake.output, strict=True)),
    snakemake.wildcards.perturbation,
    global_seed=snakemake.params.seed,
    fidelity=Fidelity.from_params(snakemake.params.fidelity),
    rates=Rates.from_params(snakemake.params.rates),
)
