"""Example vqarobust plugins (docs/extending.md). Each module registers one thing when
imported; the entry points in pyproject.toml name the modules."""
