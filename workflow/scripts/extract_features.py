"""Snakemake adapter: the feature table of one split or one corrupted image folder."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.features.extract import FeatureInputs, extract_features
from vqarobust.jobs import start_job

start_job(snakemake.log[0])
settings = dict(snakemake.params.settings)
settings.pop("word_vectors", None)  # named in params for reruns; the file is an input
inputs = FeatureInputs(
    images=snakemake.input.get("images"),
    detector=snakemake.input.get("detector"),
    questions=snakemake.input.get("questions"),
    word_vectors=snakemake.input.get("word_vectors"),
    scene_graphs=snakemake.input.get("scene_graphs"),
    # A released source's files (GQA): gqa_h5's info and folder, obj36's TSV.
    released={
        key: snakemake.input.get(name)
        for key, name in (("info", "info"), ("folder", "folder"), ("path", "tsv"))
        if snakemake.input.get(name)
    },
)
extract_features(snakemake.output[0], inputs=inputs, threads=snakemake.threads, **settings)
