"""The files the report writes beside ``index.html`` (the workflow declares each one)."""

# The answer grids show this many seeded sample questions, one figure each.
N_ANSWER_GRIDS = 3

FIGURES = ("relative_drop", "average_error", "error_vs_severity", "radar", "vre_sweep",
           "answer_type_accuracy", "question_type_accuracy", "text_error_vs_severity",
           "mmi_modalities", "rscore_basic_questions", "context_reliance", "context_flips",
           "vre_intervals", "effective_robustness", "question_type_perturbation", "image_quality",
           "attention_shift",
           *(f"answer_grid_{k}" for k in range(1, N_ANSWER_GRIDS + 1)))  # fmt: skip
TABLES = ("accuracy", "submetrics", "vre_model", "vre_corruption", "vre_family", "mmi", "rscore",
          "question_type_accuracy", "answer_type_accuracy", "answer_flips",
          "skipped_images", "text_accuracy", "vre_text", "mmi_modalities",
          "rscore_basic_questions", "rscore_text", "question_examples",
          "truncated_questions", "context_reliance", "effective_accuracy",
          "context_examples", "intervals", "model_comparisons", "rank_stability",
          "drop_tests", "effective_robustness", "misprediction_kinds", "image_quality",
          "image_quality_correlation", "attention_shift", "rscore_datasets",
          "ranker_comparison", "context_table1", "context_table2", "context_findings",
          "costs", "model_costs")  # fmt: skip
LATEX_TABLES = ("vre_model", "vre_corruption", "mmi_modalities")
