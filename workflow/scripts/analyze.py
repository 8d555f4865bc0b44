"""Snakemake adapter: run one registered analysis and write its tables as Parquet."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.analyses.registry import get
from vqarobust.analyses.runner import run_analysis
from vqarobust.jobs import start_job

start_job(snakemake.log[0])
analysis = get(snakemake.wildcards.analysis)
# A Namedlist iterates over its values: the names come from keys().
names = list(snakemake.input.keys())  # noqa: SIM118
files = {n: list(v) if isinstance(v := snakemake.input[n], list) else [v] for n in names}
required = [snakemake.input[f"tables_{name}"] for name in analysis.requires]
run_analysis(
    analysis,
    analysis.settings_from_params(snakemake.params.settings),
    files,
    required,
    snakemake.output[0],
    code=snakemake.params.code,
)
