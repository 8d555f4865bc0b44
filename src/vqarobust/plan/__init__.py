"""The study plan (:mod:`vqarobust.plan.study`): one object per config that the rule
files, the database loader and the CLI all read."""

from vqarobust.plan.study import KINDS, PlanError, StudyPlan, Subset, alternatives

__all__ = ["KINDS", "PlanError", "StudyPlan", "Subset", "alternatives"]
