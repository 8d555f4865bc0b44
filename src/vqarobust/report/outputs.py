"""The files the report writes beside ``index.html`` (the workflow declares each one)."""

FIGURES = ("relative_drop", "average_error", "error_vs_severity", "radar", "vre_sweep",
           "answer_type_accuracy")  # fmt: skip
TABLES = ("accuracy", "submetrics", "vre_model", "vre_corruption", "mmi", "rscore",
          "question_type_accuracy", "answer_type_accuracy", "answer_flips",
          "skipped_images")  # fmt: skip
LATEX_TABLES = ("vre_model", "vre_corruption")
