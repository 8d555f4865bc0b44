"""SwapMix at the feature level: swap one context object's feature row (docs/context.md).

For each context object of a question (by row; every one, or the first ``max_objects``), ``k`` class
swaps and ``k`` attribute swaps, each replacing only that object's row:

* class swap: the ``k`` classes nearest to the object's own by word-vector cosine, those
  at or above ``threshold`` (the paper's 0.5) first, nearest first, then other classes
  in a seeded random order to pad to ``k`` (fewer when the bank has fewer classes);
* attribute swap: ``k`` objects of the same class with other attributes.

A class swap puts a random object of the new class from the bank (the dataset's feature
table) in the object's place, never one carrying an attribute the question names
(``class_attributes="paper"``, SwapMix's reference code; a class without such an object
is skipped and counted in ``skipped_class_swaps``); ``"same"`` is the earlier rule, which
prefers an object with the swapped object's own attributes (donor features) or keeps
them (perfect sight). With ``mode="donor"`` (detector or released features) a swap copies
the row of that donor object; an attribute swap copies one of ``k`` objects of the same
class whose attribute set differs, drawn at random from the bank (``attribute_swaps=
"objects"``, the paper's text: "we randomly select k objects from the list of objects
belonging to same class with different attributes"), or, with ``"sets"`` (the earlier
rule), one object of each of ``k`` other attribute sets drawn uniformly (so a rare set
counts as much as a common one). With ``mode="labels"`` (perfect sight) the row is
re-encoded from the new labels; the attribute sets are the ``k`` nearest to the object's
own by the cosine of their encodings (the paper: the top k similar attributes).

The bank is the feature table of the split the questions come from; with
``context.donors: split`` (vqarobust.features.extract) it holds every image of the split,
not only the evaluated ones, so donors and candidate classes come from the whole split.

Every draw is seeded by (seed, question, object, kind), and the swaps of rank <= k' of a
run with ``k`` are exactly the swaps a run with ``k'`` makes, so one run gives the
reliance at every smaller k (the paper's Table 2 reports k = 5 and k = 10).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from vqarobust import store
from vqarobust.features.table import FeatureTable
from vqarobust.features.word_vectors import cosine
from vqarobust.seeding import item_rng

THRESHOLD = 0.5  # the paper's class similarity threshold

FEATURE_SWAP_SCHEMA = pa.schema(
    [
        ("question_id", pa.int64()),
        ("perturbation", pa.string()),
        ("severity", store.SEVERITY),
        ("rank", pa.int8()),  # 1..k among this object's swaps of this kind
        ("image_id", pa.int64()),  # the swapped feature set (image_id * VARIANTS + n)
        ("source_image_id", pa.int64()),
        ("object_index", pa.int16()),
        ("donor_image_id", pa.int64()),  # null for a perfect-sight (label) swap
        ("donor_object_index", pa.int16()),
        ("after_class", pa.string()),
        ("after_attributes", pa.list_(pa.string())),
        ("before", pa.string()),
        ("after", pa.string()),
    ]
)


@dataclass(frozen=True)
class QuestionContext:
    """What a feature swap needs of a question: its image, the rows of its context
    objects, and the class and attribute names it mentions (never swapped in)."""

    question_id: int
    image_id: int
    context: tuple[int, ...]
    excluded_classes: frozenset[str] = field(default_factory=frozenset)
    excluded_attributes: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class FeatureSwap:
    """One swap of one context object's row."""

    perturbation: str  # swap_class or swap_attribute
    rank: int
    object_index: int
    after_class: str
    after_attributes: tuple[str, ...]
    donor: tuple[int, int] | None = None  # (image id, row) in the bank

    def key(self) -> tuple:
        """What makes the swapped feature set (shared by questions of one image)."""
        return (self.object_index, self.donor, self.after_class, self.after_attributes)


def nearest_classes(
    cls: str,
    candidates: Sequence[str],
    vectors: Mapping[str, np.ndarray],
    k: int,
    rng: np.random.Generator,
    threshold: float = THRESHOLD,
) -> list[str]:
    """Up to ``k`` classes for a class swap of ``cls``: the candidates whose cosine with
    it is at least ``threshold``, most similar first (ties by name), then the others in
    ``rng``'s random order."""
    others = sorted(c for c in set(candidates) if c != cls)
    sims = {c: cosine(vectors[cls], vectors[c]) for c in others}
    passing = sorted((c for c in others if sims[c] >= threshold), key=lambda c: (-sims[c], c))
    rest = [c for c in others if sims[c] < threshold]
    padding = [rest[i] for i in rng.permutation(len(rest))]
    return (passing + padding)[:k]


def nearest_attribute_sets(
    attributes: tuple[str, ...],
    candidates: Sequence[tuple[str, ...]],
    encode: Callable[[tuple[str, ...]], np.ndarray],
    k: int,
) -> list[tuple[str, ...]]:
    """The ``k`` attribute sets nearest to ``attributes`` by the cosine of their
    encodings (ties by the sets' names), the object's own left out."""
    own = encode(attributes)
    others = sorted(set(candidates) - {attributes})
    return sorted(others, key=lambda a: (-round(cosine(own, encode(a)), 6), a))[:k]


def describe(cls: str | None, attributes: Sequence[str]) -> str:
    """``red small circle``: the attributes, then the class."""
    return " ".join([*attributes, cls or "?"])


# What a class swap's new object looks like: ``paper`` (SwapMix's reference code) a random
# object of the new class, its attributes included; ``same`` the swapped object's own
# attributes (perfect sight keeps them; donor features prefer a donor that has them).
CLASS_ATTRIBUTES = ("paper", "same")
# How a donor-feature attribute swap draws: ``objects`` (the paper's text) k random objects
# of the class with other attributes; ``sets`` (the earlier rule) k attribute sets drawn
# uniformly, then one object of each. Perfect sight ranks attribute sets either way.
ATTRIBUTE_SWAPS = ("objects", "sets")


class FeatureSwapPlanner:
    """Plans the feature swaps of questions over one feature bank."""

    # One keyword per swap setting, as FeatureSwapSettings (materialize.feature_context)
    # has one field each: the bank and word vectors, then the settings.
    def __init__(  # noqa: PLR0913
        self,
        bank: FeatureTable,
        class_vectors: Mapping[str, np.ndarray],
        k: int,
        seed: int,
        mode: str = "donor",
        threshold: float = THRESHOLD,
        max_objects: int | None = None,
        class_attributes: str = "paper",
        attribute_swaps: str = "sets",
    ) -> None:
        if mode not in ("donor", "labels"):
            raise ValueError(f"feature swap mode is donor or labels, not {mode!r}")
        if attribute_swaps not in ATTRIBUTE_SWAPS:
            raise ValueError(
                f"attribute_swaps is one of {ATTRIBUTE_SWAPS}, not {attribute_swaps!r}"
            )
        self.attribute_rule = attribute_swaps
        if class_attributes not in CLASS_ATTRIBUTES:
            raise ValueError(
                f"class_attributes is one of {CLASS_ATTRIBUTES}, not {class_attributes!r}"
            )
        self.class_attributes = class_attributes
        # Class swaps left out because the new class has no object the question allows.
        self.skipped_class_swaps = 0
        self._allowed_rows: dict[tuple[str, frozenset[str]], list[int]] = {}
        if mode == "labels" and bank.vocab is None:
            raise ValueError("label swaps need a perfect-sight table (with word vectors)")
        self.bank, self.vectors, self.k, self.seed = bank, class_vectors, k, seed
        self.mode, self.threshold, self.max_objects = mode, threshold, max_objects
        # Donors by class and by (class, attributes): bank rows in table order.
        self.by_class: dict[str, list[int]] = {}
        self.by_labels: dict[tuple[str, tuple[str, ...]], list[int]] = {}
        for row, (cls, attrs) in enumerate(zip(bank.classes, bank.attributes, strict=True)):
            if cls is None:
                continue
            self.by_class.setdefault(cls, []).append(row)
            self.by_labels.setdefault((cls, attrs), []).append(row)
        self.classes = sorted(c for c in self.by_class if c in class_vectors)
        self.attribute_sets = sorted({a for _, a in self.by_labels})
        self.sets_of_class: dict[str, list[tuple[str, ...]]] = {}
        for cls, attrs in sorted(self.by_labels):
            self.sets_of_class.setdefault(cls, []).append(attrs)
        self._encoded: dict[tuple[str, ...], np.ndarray] = {}
        # GQA names over a thousand classes and thousands of attribute sets. Classes are
        # ranked once per class, and a question's exclusions only filter the ranking
        # (filtering a sorted list keeps its order); attribute sets are scored all at
        # once per swap. Either way every swap is the one nearest_classes /
        # nearest_attribute_sets would choose.
        self._class_rankings: dict[str, tuple[list[str], list[str]]] = {}
        self._set_matrix: tuple[np.ndarray, np.ndarray] | None = None
        self._set_index = {a: i for i, a in enumerate(self.attribute_sets)}
        self._sets_with: dict[str, np.ndarray] = {}

    def _class_ranking(self, cls: str) -> tuple[list[str], list[str]]:
        """(classes at or above the threshold, nearest first; the others, by name)."""
        if cls not in self._class_rankings:
            others = [c for c in self.classes if c != cls]
            sims = {c: cosine(self.vectors[cls], self.vectors[c]) for c in others}
            passing = sorted(
                (c for c in others if sims[c] >= self.threshold), key=lambda c: (-sims[c], c)
            )
            self._class_rankings[cls] = passing, [c for c in others if sims[c] < self.threshold]
        return self._class_rankings[cls]

    def _nearest_sets(self, attributes: tuple[str, ...], excluded: frozenset[str]) -> list:
        """The k attribute sets nearest to ``attributes`` among those sharing no
        ``excluded`` attribute: nearest_attribute_sets over every set of the bank, with
        the cosines of all sets computed at once (thousands of sets on GQA)."""
        sets = self.attribute_sets
        if self._set_matrix is None:
            encoded = np.stack([self._encode_attributes(a) for a in sets]).astype(np.float64)
            self._set_matrix = encoded, np.linalg.norm(encoded, axis=1)
            for index, a in enumerate(sets):
                for name in a:
                    self._sets_with.setdefault(name, []).append(index)
            self._sets_with = {n: np.asarray(v) for n, v in self._sets_with.items()}
        encoded, norms = self._set_matrix
        own = np.asarray(self._encode_attributes(attributes), np.float64)
        scale = norms * float(np.linalg.norm(own))
        with np.errstate(invalid="ignore", divide="ignore"):
            sims = np.where(scale > 0, encoded @ own / scale, 0.0)
        keys = -np.round(sims, 6)
        if attributes in self._set_index:
            keys[self._set_index[attributes]] = np.inf
        for name in excluded:
            if name in self._sets_with:
                keys[self._sets_with[name]] = np.inf
        # The k smallest keys (with every set tied with the k-th), then ties by the sets'
        # names: ``sets`` is sorted, so by index.
        candidates = np.arange(len(sets))
        if self.k < len(sets):
            candidates = np.flatnonzero(keys <= np.partition(keys, self.k - 1)[self.k - 1])
        order = candidates[np.lexsort((candidates, keys[candidates]))][: self.k]
        return [sets[i] for i in order if np.isfinite(keys[i])]

    def _donor_ref(self, row: int) -> tuple[int, int]:
        image_id = int(self.bank.image_ids[row])
        return image_id, row - self.bank.rows[image_id][0]

    def _encode_attributes(self, attributes: tuple[str, ...]) -> np.ndarray:
        from vqarobust.features.perfect_sight import encode_attributes

        if attributes not in self._encoded:
            self._encoded[attributes] = encode_attributes(attributes, self.bank.vocab or {})
        return self._encoded[attributes]

    def _allowed(self, cls: str, excluded: frozenset[str]) -> list[int]:
        """The bank rows of ``cls`` that carry no ``excluded`` attribute, in table order;
        cached per (class, exclusions): questions share them, and a class can hold
        thousands of objects."""
        key = (cls, excluded)
        if key not in self._allowed_rows:
            rows = self.by_class[cls]
            self._allowed_rows[key] = (
                rows
                if not excluded
                else [r for r in rows if not set(self.bank.attributes[r]) & excluded]
            )
        return self._allowed_rows[key]

    def _pick(self, rows: Sequence[int], rng: np.random.Generator) -> tuple[int, int]:
        return self._donor_ref(rows[int(rng.integers(len(rows)))])

    def class_swaps(self, q: QuestionContext, row: int) -> list[FeatureSwap]:
        """The class swaps of one context object (bank row ``row``)."""
        cls, attrs = self.bank.classes[row], self.bank.attributes[row]
        if cls is None or cls not in self.vectors:
            return []
        index = row - self.bank.rows[q.image_id][0]
        rng = item_rng(self.seed, "feature-swap", q.question_id, index, "class")
        # As nearest_classes(cls, allowed classes, ...), from the class's ranking.
        passing, rest = self._class_ranking(cls)
        passing = [c for c in passing if c not in q.excluded_classes]
        rest = [c for c in rest if c not in q.excluded_classes]
        chosen = (passing + [rest[i] for i in rng.permutation(len(rest))])[: self.k]
        out = []
        for rank, new in enumerate(chosen, 1):
            if self.mode == "labels" and self.class_attributes == "same":
                out.append(FeatureSwap("swap_class", rank, index, new, attrs))
                continue
            # The paper's rule: the swapped-in object is a random object of the new class
            # (its attributes, and with donor features its row), never one that carries an
            # attribute the question mentions; ``same`` prefers the object's own attributes.
            same = self.by_labels.get((new, attrs), []) if self.class_attributes == "same" else []
            pool = same or self._allowed(new, q.excluded_attributes)
            if not pool:
                self.skipped_class_swaps += 1
                continue
            draw = item_rng(self.seed, "feature-donor", q.question_id, index, "class", rank)
            donor = self._pick(pool, draw)
            after = self.bank.attributes[self.bank.row(*donor)]
            out.append(
                FeatureSwap(
                    "swap_class", rank, index, new, after, None if self.mode == "labels" else donor
                )
            )
        return out

    def attribute_swaps(self, q: QuestionContext, row: int) -> list[FeatureSwap]:
        """The attribute swaps of one context object (bank row ``row``)."""
        cls, attrs = self.bank.classes[row], self.bank.attributes[row]
        if cls is None:
            return []
        index = row - self.bank.rows[q.image_id][0]

        def allowed(a: tuple[str, ...]) -> bool:
            return not set(a) & q.excluded_attributes

        if self.mode == "labels":
            chosen = self._nearest_sets(attrs, q.excluded_attributes)
            return [
                FeatureSwap("swap_attribute", rank, index, cls, a)
                for rank, a in enumerate(chosen, 1)
            ]
        rng = item_rng(self.seed, "feature-swap", q.question_id, index, "attribute")
        if self.attribute_rule == "objects":
            # k objects of the class with another attribute set, in a seeded random order
            # of the class's allowed objects (the first k of a longer run are these).
            rows = self._allowed(cls, q.excluded_attributes)
            picked = []
            for i in rng.permutation(len(rows)):
                if self.bank.attributes[rows[i]] != attrs:
                    picked.append(rows[i])
                    if len(picked) == self.k:
                        break
            return [
                FeatureSwap("swap_attribute", rank, index, cls, self.bank.attributes[r], donor)
                for rank, (r, donor) in enumerate(((r, self._donor_ref(r)) for r in picked), 1)
            ]
        own = [a for a in self.sets_of_class.get(cls, []) if a != attrs and allowed(a)]
        chosen = [own[i] for i in rng.permutation(len(own))][: self.k]
        out = []
        for rank, a in enumerate(chosen, 1):
            draw = item_rng(self.seed, "feature-donor", q.question_id, index, "attribute", rank)
            out.append(
                FeatureSwap(
                    "swap_attribute",
                    rank,
                    index,
                    cls,
                    a,
                    self._pick(self.by_labels[(cls, a)], draw),
                )
            )
        return out

    def swaps(self, q: QuestionContext, perturbations: Sequence[str]) -> list[FeatureSwap]:
        """Every swap of one question: per context object (by row; the first
        ``max_objects``, every one when None) its class swaps, then its attribute swaps."""
        if q.image_id not in self.bank:
            raise KeyError(f"question {q.question_id}: image {q.image_id} has no features")
        start, end = self.bank.rows[q.image_id]
        out: list[FeatureSwap] = []
        for index in sorted(set(q.context))[: self.max_objects]:
            if not 0 <= index < end - start:
                raise IndexError(f"question {q.question_id}: image {q.image_id} has no row {index}")
            if "swap_class" in perturbations:
                out += self.class_swaps(q, start + index)
            if "swap_attribute" in perturbations:
                out += self.attribute_swaps(q, start + index)
        return out


def apply_swap(bank: FeatureTable, image_id: int, swap: FeatureSwap) -> object:
    """The image's region features with the swap made: only the swapped row changes, to
    the donor's row or to the encoding of the new labels."""
    base = bank.region_features(image_id)
    if swap.donor is not None:
        value = bank.matrix[bank.row(*swap.donor)]
    else:
        value = bank.encode_labels(swap.after_class, swap.after_attributes)
    return base.with_row(swap.object_index, value)
