"""Where each image subset lies: the (perturbation, severity) pairs of the settings
beside the image folders of the job's ``images`` input, in the same order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vqarobust.analyses.base import Inputs, RunOptions


def image_folders(inputs: Inputs, subsets: Sequence[Sequence]) -> list[tuple[str, int, str]]:
    """(perturbation, severity, folder) of every image subset."""
    folders = inputs.many("images")
    return [(str(p), int(s), f) for (p, s), f in zip(subsets, folders, strict=True)]


def subset_pairs(pairs: Sequence[Sequence]) -> list[list]:
    """The (perturbation, severity) pairs as JSON-like lists (params and their rebuild
    compare equal)."""
    return [[str(p), int(s)] for p, s in pairs]


@dataclass(frozen=True)
class ImageSettings:
    """``seed`` (which questions or examples) and the image subsets."""

    seed: int
    image_subsets: Sequence[Sequence]

    @classmethod
    def from_options(cls, options: RunOptions) -> ImageSettings:
        return cls(options.seed, subset_pairs(options.image_subsets))
