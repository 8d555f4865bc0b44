"""Snakemake adapter: rank the basic questions of every distinct question for one ranker."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.jobs import start_job
from vqarobust.materialize.questions import rank_basic_questions
from vqarobust.text.ranking import RankSettings

start_job(snakemake.log[0])
# Only LASSO's params carry its mode, alpha, lambda and the pre-filter, only BLEU's its
# smoothing; exclude_main only when it is not the default (own).
names = {
    "k": "k",
    "lasso_alpha": "alpha",
    "prefilter": "prefilter",
    "lasso_mode": "lasso_mode",
    "lasso_lambda": "lasso_lambda",
    "exclude_main": "exclude_main",
    "bleu_smoothing": "bleu_smoothing",
}
settings = {names[key]: value for key, value in dict(snakemake.params.ranking).items()}
rank_basic_questions(
    snakemake.input.questions,
    list(snakemake.input.pool),
    snakemake.output[0],
    rankers=[snakemake.wildcards.ranker],
    settings=RankSettings(**settings),
    embeddings_path=snakemake.input.embeddings,
)
