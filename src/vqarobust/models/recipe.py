"""How a reference model is trained: a config's ``models.<name>.train`` section as one
frozen object (docs/models.md, "Reference models and the checkpoints that ship").

The workflow's ``train_model`` rule hands the section (with the thread count and, for
SwapMix, the scene seed and split) as params; :meth:`Recipe.from_params` splits it into
the training settings and the architecture's own options (``hidden_size``, ``channels``,
...), which go to :data:`vqarobust.models.architectures.ARCHITECTURES` unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vqarobust.context.feature_swaps import THRESHOLD


@dataclass(frozen=True)
class Recipe:
    """The training settings of one reference model.

    ``epochs`` may be fractional. ``swapmix`` (``p_object``, ``p_class``, ``k``) trains
    with SwapMix on scenes, whose training scenes are regenerated from ``scene_seed`` and
    ``split``. ``swap_mode`` (donor rows, or perfect sight's label re-encoding) and
    ``threshold`` (the class similarity of the swaps, ``context.threshold``) concern
    models on region features only. ``threads``: training's sums, so its weights, depend
    on the thread count. ``pretrain`` (``answers``, ``epochs``) trains first on the
    questions whose answer is one of ``answers`` only, then on every question (a
    curriculum; models on random questions without SwapMix)."""

    architecture: str
    epochs: float = 3.0
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    seed: int = 0
    threads: int = 1
    swapmix: Mapping[str, Any] | None = None
    pretrain: Mapping[str, Any] | None = None
    scene_seed: int = 0
    split: str = "train"
    swap_mode: str = "donor"
    threshold: float = THRESHOLD
    class_attributes: str = "paper"
    attribute_swaps: str = "objects"
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Recipe:
        """A recipe from a ``train`` section: its known keys are settings, every other
        key an option of the architecture."""
        known = {f.name for f in dataclasses.fields(cls)} - {"options"}
        settings = {k: v for k, v in params.items() if k in known}
        options = {k: v for k, v in params.items() if k not in known}
        return cls(**settings, options=options)

    @classmethod
    def of(cls, architecture: str, **params: Any) -> Recipe:
        """``Recipe.from_params`` with keyword arguments (tests, benchmarks, notebooks)."""
        return cls.from_params({"architecture": architecture, **params})

    def feature_settings_unset(self) -> bool:
        """True when ``swap_mode`` and ``threshold`` are their defaults (a model on
        pixels has no use for them)."""
        return (
            self.swap_mode == "donor"
            and self.threshold == THRESHOLD
            and self.class_attributes == "paper"
            and self.attribute_swaps == "objects"
        )
