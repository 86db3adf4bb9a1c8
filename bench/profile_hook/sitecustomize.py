"""Profiles every Python process of a benchmarked run (``bench.limits_1000k --profile DIR``).

Python imports ``sitecustomize`` at start-up from the path; the benchmark puts this folder first on
``PYTHONPATH`` of the ``opencompass`` run, so the driver and every task process it starts run under
``cProfile``, every thread with its own profiler (OpenCompass's runner starts its tasks from threads),
and write ``<DIR>/<pid>.prof`` (all threads merged) when they exit. Not part of the package.
"""

from __future__ import annotations

import atexit
import cProfile
import os
import pstats
import sys
import threading

_DIR = os.environ.get("NEEDLEBENCH_PROFILE_DIR")
_PROFILES: list[cProfile.Profile] = []


def _start_thread(frame: object, event: str, arg: object) -> None:
    """The first profile event of a new thread: give it a profiler of its own (it replaces this hook)."""
    profile = cProfile.Profile()
    _PROFILES.append(profile)
    profile.enable()


def _dump() -> None:
    main = _PROFILES[0]
    main.disable()
    stats = pstats.Stats(main)
    for profile in _PROFILES[1:]:
        try:
            profile.create_stats()
            stats.add(profile)
        except Exception as exc:  # a profile of a thread still running: leave it out
            print(f"profile hook: a thread's profile left out ({exc})", file=sys.stderr)
    stats.dump_stats(os.path.join(_DIR or ".", f"{os.getpid()}.prof"))


if _DIR:
    _PROFILES.append(cProfile.Profile())
    _PROFILES[0].enable()
    threading.setprofile(_start_thread)
    atexit.register(_dump)
