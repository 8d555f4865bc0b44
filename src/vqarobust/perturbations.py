"""The one perturbation registry, across modalities.

Every subset of the benchmark is a (modality, perturbation, severity), severity 0 = clean.
Modalities: ``image`` (corruptions and the ``blank`` control, :mod:`vqarobust.corruptions`),
``text`` (question perturbations, :mod:`vqarobust.text`) and ``basic_question`` (the main
question followed by ranked basic questions, one perturbation per ranker,
:mod:`vqarobust.text.ranking`) and ``context`` (SwapMix swaps of objects the question does
not depend on, :mod:`vqarobust.context`); ``vqabq`` holds one subset, ``vqabq_chain``
(every model asked each main question with its first n = 1, 2, 3 basic questions, a
generative model through its chain prompt; kept out of the robustness metrics,
:mod:`vqarobust.metrics.vqabq`). Each modality registers through a view of
``PERTURBATIONS`` that adds its ``modality`` tag, so a perturbation is one decorated
function in one file and a name is unique across modalities.
"""

from __future__ import annotations

from vqarobust.registry import Entry, Registry

PERTURBATIONS: Registry = Registry("perturbation")
MODALITIES = ("image", "text", "basic_question", "context", "vqabq")
# Modalities whose subsets are no perturbation of the robustness metrics (VRE, MMI,
# R_score, the bootstrap): SwapMix's swaps and VQABQ's question sets have their own
# tables.
OWN_TABLES = ("context", "vqabq")


def _registered() -> Registry:
    # Importing the modality packages registers their perturbations; done lazily because
    # they import this module.
    import vqarobust.context  # noqa: F401
    import vqarobust.corruptions  # noqa: F401
    import vqarobust.text  # noqa: F401

    return PERTURBATIONS


def entry(name: str) -> Entry:
    """The registry entry of a perturbation of any modality."""
    return _registered().entry(name)


def modality(name: str) -> str:
    """The modality of a perturbation (``image``, ``text``, ``basic_question``, ``context``)."""
    return entry(name).tags["modality"]


def names(modality: str | None = None) -> list[str]:
    """Registered perturbation names, optionally of one modality."""
    if modality is not None and modality not in MODALITIES:
        raise ValueError(f"unknown modality {modality!r}; known: {', '.join(MODALITIES)}")
    registry = _registered()
    return registry.list(modality=modality) if modality else registry.list()


def severities(name: str) -> list[int]:
    """The severities (levels) a perturbation defines, 1..n. A context perturbation has
    no fixed count (its severities are a question's swap indices, 1..objects x k: see
    :func:`vqarobust.inference.context_severities`)."""
    found = entry(name)
    if found.tags.get("modality") == "context":
        raise ValueError(
            f"{name}: a context perturbation's severities are the swap "
            "indices its question set holds (inference.context_severities)"
        )
    return list(range(1, int(found.tags.get("severities", 5)) + 1))
