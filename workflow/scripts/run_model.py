"""Snakemake adapter: run one model on every severity of one subset."""

from vqarobust.warm import hand_over

hand_over(snakemake)  # a local run's warm process runs the rest (docs/workflow.md, "Warm start")

import torch

from vqarobust.inference import Subset, context_severities, run_inference
from vqarobust.jobs import start_job
from vqarobust.models import ModelRef

start_job(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
severities = snakemake.params.severities
modality = snakemake.params.modality
question_sets = snakemake.input.get("question_sets")
# A feature model (LXMERT) reads feature tables where the others read image folders.
features = snakemake.input.get("features")
folders, inputs = (features, "features") if features else (snakemake.input.images, "images")
swaps = snakemake.input.get("swaps")
if modality == "context":
    # One question set and one image folder (or feature table) hold every swap index.
    severities = context_severities(question_sets[0])
    sets = list(question_sets) * len(severities)
    images = [folders[0]] * len(severities)
elif question_sets:
    # Perturbed questions about the clean images.
    sets = list(question_sets)
    images = [folders[0]] * len(sets)
else:
    sets, images = [None] * len(severities), list(folders)
subsets = [
    Subset(snakemake.wildcards.subset, severity, image_dir, modality, question_set, inputs,
           swaps or None)
    for severity, image_dir, question_set in zip(severities, images, sets, strict=True)
]  # fmt: skip
spec = dict(snakemake.params.spec)
trained = snakemake.input.get("model")  # input is a list with names: no `in` on the names
if trained:
    # A checkpoint folder: the one the workflow trained (a module's prefix moves it) or the
    # entry's own local folder (an input, so that weights replaced in place rerun the job).
    spec["path_or_id"] = trained
# Batch size and the like: the runtime channel, since they never change answers.
model = ModelRef(snakemake.wildcards.model, spec, options=dict(snakemake.params.runtime.values))
run_inference(model, snakemake.input.questions, subsets, snakemake.output[0])
