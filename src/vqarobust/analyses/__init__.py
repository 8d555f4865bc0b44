"""Analyses: each family of results tables one module (docs/architecture.md). The
registry is :mod:`vqarobust.analyses.registry`; this package file imports nothing, so
that an analysis's code digest covers only the modules it imports itself."""
