"""Snakemake adapter: run one model on every severity of the job's subsets (all of its
subsets, or one), loading the weights once; a per-model job then draws the model's
attention maps with the same weights."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
import importlib

import torch

from vqarobust.inference import ATTENTION_MODULE, job_subsets, run_model_job
from vqarobust.jobs import start_job
from vqarobust.models import FAMILIES, ModelRef

# A model whose entry allows downloads may reach the Hub; every other job runs offline.
start_job(snakemake.log[0], allow_download=snakemake.params.runtime.get("allow_download", False))
torch.set_num_threads(snakemake.threads)
# The params list the subsets in the order of the outputs, which end with the attention
# table where the job has one; each subset's files are the inputs named <kind>__<subset>
# (vqarobust.plan.infer).
subsets = snakemake.params.subsets
attention_out = snakemake.output.get("attention")
outputs = [
    (job_subsets(name, subset["modality"], subset["severities"], snakemake.input), path)
    for (name, subset), path in zip(subsets.items(), snakemake.output[: len(subsets)], strict=True)
]
assert len(snakemake.output) == len(subsets) + (attention_out is not None)
# A per-model job's attention maps, drawn with the weights its answers loaded (a model
# whose family exposes none gets the empty table, loading nothing). Imported by name
# (vqarobust.inference.ATTENTION_MODULE says why).
draw = attention_out and importlib.import_module(ATTENTION_MODULE).attention_writer(
    snakemake.wildcards.model,
    snakemake.input.questions,
    snakemake.params.get("attention"),
    snakemake.input.get("attention_images") or [],
    attention_out,
)
spec = dict(snakemake.params.spec)
family = FAMILIES.entry(spec["family"])
if "job" in family.tags:
    # A family with no model to load (imported: answers read from another harness's logs,
    # docs/interop.md) runs its own job function, imported by name: its code then reruns
    # only its models' jobs (the family's code digest), not every model's inference.
    module = importlib.import_module(family.tags.get("module", family.origin))
    job = getattr(module, family.tags["job"])
    job(snakemake.wildcards.model, spec, snakemake.input.questions, outputs)
    if draw:
        draw(None)
else:
    trained = snakemake.input.get("model")  # a list with names: no `in` on the names
    if trained:
        # A checkpoint folder: the one the workflow trained (a module's prefix moves it) or
        # the entry's own local folder (an input, so that weights replaced in place rerun
        # the job).
        spec["path_or_id"] = trained
    # Batch size and the like: the runtime channel, since they never change answers.
    options = dict(snakemake.params.runtime.values)
    model = ModelRef(snakemake.wildcards.model, spec, options=options)
    run_model_job(
        model, snakemake.input.questions, outputs, threads=snakemake.threads, then=draw or None
    )
