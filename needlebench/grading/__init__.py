"""Grading: the matching primitives tasks share and grading a dataset into records (``needlebench.record``).

Each task's grader lives with its task in ``needlebench.tasks``; nothing here imports a task
(callers look the task up and pass its ``TaskSpec`` in).
"""
