"""Snakemake adapter: train a reference model and save it in Hugging Face format."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.collector import imports_paused
from vqarobust.jobs import start_job
from vqarobust.models.recipe import Recipe

start_job(snakemake.log[0])
settings = dict(snakemake.params.train)
settings.pop("word_vectors", None)  # named in params for reruns; the file is an input
recipe = Recipe.from_params(settings)
if hasattr(snakemake.input, "features"):
    # A region-feature model (LXMERT) trains on the split's feature table.
    with imports_paused():
        from vqarobust.models.feature_training import train_feature_model

    train_feature_model(
        snakemake.input.questions,
        snakemake.input.features,
        snakemake.output[0],
        recipe,
        name=snakemake.wildcards.model,
        word_vectors_path=snakemake.input.get("word_vectors"),
    )
else:
    with imports_paused():
        from vqarobust.models.training import train_reference_model

    train_reference_model(
        snakemake.input.questions,
        snakemake.input.images,
        snakemake.output[0],
        recipe,
        name=snakemake.wildcards.model,
    )
