"""Snakemake adapter: one model's attention maps on the clean and every corrupted image."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
import torch

from vqarobust.attention import attention_maps
from vqarobust.jobs import start_job
from vqarobust.models import ModelRef

start_job(snakemake.log[0], allow_download=snakemake.params.runtime.get("allow_download", False))
torch.set_num_threads(snakemake.threads)
spec = dict(snakemake.params.spec)
trained = snakemake.input.get("model")  # input is a list with names: no `in` on the names
if trained:
    # A checkpoint the workflow trained: where its job wrote it (a module's prefix moves it).
    spec["path_or_id"] = trained
subsets = [
    (p, s, folder)
    for (p, s), folder in zip(snakemake.params.subsets, snakemake.input.images, strict=True)
]
model = ModelRef(snakemake.wildcards.model, spec, options=dict(snakemake.params.runtime.values))
attention_maps(
    model,
    snakemake.input.questions,
    subsets,
    snakemake.output[0],
    n=snakemake.params.n,
    seed=snakemake.params.seed,
)
