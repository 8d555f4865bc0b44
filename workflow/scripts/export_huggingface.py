"""Snakemake adapter: every subset of the run as a Hugging Face dataset folder with
lmms-eval tasks (docs/interop.md)."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.hf_export import export_dataset
from vqarobust.jobs import start_job

start_job(snakemake.log[0])
export_dataset(snakemake.params.entries, snakemake.params.facts, ".", snakemake.output[0])
