"""Model cards: each model's family, checkpoint, parameter count, clean accuracy and VRE
with its interval."""

from __future__ import annotations

import duckdb

from vqarobust.analyses.base import Analysis, Inputs, NoSettings, Result, Table
from vqarobust.model_cards import card_rows
from vqarobust.provenance import prediction_records

_CARDS = """
    SELECT c.model, c.family, c.checkpoint, c.parameters,
           a.accuracy AS clean_accuracy, v.vre, i.low AS vre_low, i.high AS vre_high
    FROM cards c
    LEFT JOIN accuracy a ON a.model = c.model AND a.modality = 'clean'
    LEFT JOIN vre_model v ON v.model = c.model AND v.modality = 'image'
    LEFT JOIN intervals i ON i.metric = 'vre_model' AND i.model = c.model
      AND i.modality = 'image'
    ORDER BY c.model"""


def run(inputs: Inputs, settings: NoSettings) -> Result:
    """One card per model that has prediction files with records."""
    del settings
    cards = card_rows(prediction_records(inputs.many("predictions")))
    with duckdb.connect() as con:
        for name in ("accuracy", "vre_model", "intervals"):
            con.register(name, inputs.table(name).to_arrow())
        con.register("cards", cards.to_arrow())
        table = con.sql(_CARDS).pl()
    return Result(tables={"model_cards": Table(table)})


ANALYSIS = Analysis(
    name="model_cards",
    doc=__doc__,
    tables={"model_cards": "family, checkpoint, parameters, clean accuracy, VRE per model"},
    settings_type=NoSettings,
    run=run,
    requires=("accuracy", "robustness", "uncertainty"),
    inputs=("predictions",),
)
