"""Region features: per-object feature rows and boxes for region-feature models (LXMERT).

A feature source turns the objects of an image into rows of a matrix, one per object,
with the object's box. Three kinds (docs/context.md, "Feature models"):

* ``detector``: each object's crop encoded by a small CNN trained on object class and
  attributes (scenes; the stand-in for Faster R-CNN, :mod:`vqarobust.features.detector`);
* ``perfect_sight``: each object's ground-truth class and attributes through word vectors
  (:mod:`vqarobust.features.perfect_sight`);
* ``gqa_h5`` / ``obj36``: released detector features read lazily per image
  (:mod:`vqarobust.features.released`).

Features are materialized once per split as a Parquet table
(:data:`vqarobust.features.table.FEATURE_SCHEMA`).
"""
