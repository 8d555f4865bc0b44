"""vqarobust: measure how robust Visual Question Answering models are.

The package holds all logic of the workflow: dataset adapters, image corruptions,
model adapters, scoring and robustness metrics, DuckDB loading and the report.
"""

__version__ = "0.1.0"
