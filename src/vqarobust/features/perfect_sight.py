"""Perfect sight: an object's ground-truth class and attributes as its feature row.

The SwapMix paper's "perfect sight" models see each object as the word vector of its
class name concatenated with an encoding of its attributes, beside its box. Here the
attribute part is the mean of the attributes' word vectors (zeros for an object without
attributes), so a row has twice the word vectors' dimension; the box goes to the model
as ``visual_pos`` like any region's box.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from vqarobust.features.table import feature_table


def encode_attributes(attributes: Sequence[str], vocab: Mapping[str, np.ndarray]) -> np.ndarray:
    """The mean word vector of the attributes (zeros without any)."""
    dim = len(next(iter(vocab.values())))
    if not attributes:
        return np.zeros(dim, np.float32)
    return np.mean([vocab[a] for a in attributes], axis=0).astype(np.float32)


def encode_object(
    cls: str, attributes: Sequence[str], vocab: Mapping[str, np.ndarray]
) -> np.ndarray:
    """[class vector, attribute encoding] as one float32 row."""
    missing = [n for n in (cls, *attributes) if n not in vocab]
    if missing:
        raise KeyError(f"perfect sight: no word vector for {missing}")
    return np.concatenate(
        [np.asarray(vocab[cls], np.float32), encode_attributes(attributes, vocab)]
    )


def perfect_sight_table(objects: Iterable[dict], vocab: Mapping[str, np.ndarray]) -> object:
    """A feature table from objects with ``image_id``, ``object_index``, ``object_id``,
    ``box``, ``class`` and ``attributes``: each row encoded by :func:`encode_object`."""
    objects = list(objects)
    encoded = [encode_object(o["class"], o["attributes"], vocab) for o in objects]
    dim = 2 * len(next(iter(vocab.values()))) if vocab else 0
    matrix = np.stack(encoded) if encoded else np.zeros((0, dim), np.float32)
    return feature_table(objects, matrix)
