"""Per-sample grading: text clean-up and matching primitives, and the graders tasks share."""
