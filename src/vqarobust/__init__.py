"""vqarobust: measure how robust Visual Question Answering models are.

The package holds all logic of the workflow: dataset adapters, image corruptions,
model adapters, scoring and robustness metrics, DuckDB loading and the report.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("vqarobust")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "unknown"
