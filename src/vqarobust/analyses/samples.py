"""The report's answer grid: a few seeded sample questions and their images' thumbnails
in every image subset."""

from __future__ import annotations

from vqarobust.analyses.base import Analysis, Inputs, Result, Table
from vqarobust.analyses.images import ImageSettings, image_folders
from vqarobust.samples import sample_images, sample_questions


def run(inputs: Inputs, settings: ImageSettings) -> Result:
    """Thumbnails of the sampled questions' images."""
    picked = sample_questions(inputs.table("_questions"), settings.seed)
    thumbs = sample_images(picked, image_folders(inputs, settings.image_subsets))
    return Result(tables={"sample_images": Table(thumbs, ordered=True)})


ANALYSIS = Analysis(
    name="samples",
    doc=__doc__,
    tables={"sample_images": "thumbnails of the sample questions' images per subset"},
    settings_type=ImageSettings,
    run=run,
    requires=("scoring",),
    inputs=("images",),
)
