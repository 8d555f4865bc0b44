"""Materialize perturbed subsets once: corrupted images (:mod:`.images`) and perturbed or
basic-question-noised question sets (:mod:`.questions`)."""
