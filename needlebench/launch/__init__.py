"""How our processes start OpenCompass's code: the task processes' lean entry (``task_entry``) and the lean
``opencompass`` command (``driver``).

Apart from the adapters (``needlebench.opencompass``: the classes OpenCompass's configs name) because these are
not classes OpenCompass builds but the way a process imports it: lazy shells of its packages and stand-ins for
the names it takes from torch at import time, so a task reaches its first sample in a third of the CPU time.
"""
