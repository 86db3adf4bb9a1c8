"""``needlebench status RUN [--watch] [--json]``: where a run stands, from its folder alone.

Per model and dataset: samples and prompt tokens done against the plan, failed and throttled requests,
the rate over the last minutes and an ETA; the infer tasks running, finished or never started; for a run
that is not running, what is left and the exact command that finishes it. It reads files only
(``runfolder.status``), so it works on a crashed run, or on a Slurm work dir from a login node, and never
changes the run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rich.live import Live

from ..report.status_view import status_view
from ..runfolder.status import StatusReader, find_run
from ..terminal import console

__all__ = ["show_status"]


def show_status(path: Path, as_json: bool = False, watch: bool = False, interval: float = 2.0) -> int:
    """Print a run's status once, or redraw it until the run is no longer running (``watch``).

    Args:
        path: a run folder or a work dir (its newest run).
        as_json: print one JSON object (``RunStatus.to_dict``) instead of the table.
        watch: redraw every ``interval`` seconds until the run stops or finishes (or Ctrl-C).
        interval: seconds between redraws.

    Returns:
        0.

    Raises:
        ConfigError: the folder is not a run (one line; exit 2).
    """
    reader = StatusReader(find_run(path))
    status = reader.read()
    if as_json and not watch:
        print(json.dumps(status.to_dict(), indent=1, sort_keys=True))
        return 0
    out = console(sys.stdout)
    if not watch:
        out.print(status_view(status))
        return 0
    try:
        with Live(status_view(status), console=out, refresh_per_second=1, auto_refresh=False) as live:
            while status.state == "running":
                time.sleep(interval)
                status = reader.read()
                live.update(status_view(status), refresh=True)
    except KeyboardInterrupt:
        pass
    if as_json:
        print(json.dumps(status.to_dict(), indent=1, sort_keys=True))
    return 0
