"""Grading: the matching primitives tasks share, the graded-sample record and grading a dataset.

Each task's grader lives with its task in ``needlebench.tasks``; nothing here imports a task
(callers look the task up and pass its ``TaskSpec`` in).
"""
