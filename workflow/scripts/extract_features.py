"""Snakemake adapter: the feature table of one split or one corrupted image folder."""

from vqarobust.features.extract import extract_features
from vqarobust.logs import setup_logging

setup_logging(snakemake.log[0])
settings = dict(snakemake.params.settings)
settings.pop("word_vectors", None)  # named in params for reruns; the file is an input
extract_features(
    snakemake.output[0],
    images=snakemake.input.get("images"),
    detector=snakemake.input.get("detector"),
    questions=snakemake.input.get("questions"),
    word_vectors_path=snakemake.input.get("word_vectors"),
    threads=snakemake.threads,
    **settings,
)
