"""OpenCompass summarizer: the usual summary files plus our tables, figures and report.html.

It first runs OpenCompass's DefaultSummarizer (so ``summary_<time>.csv``
still appears), then writes ``needlebench_summary.csv``, the ATC and
NeedleChain tables, PNG figures and ``report.html`` into the run's
``summary/`` folder. A failure in the report never hides the default summary.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from opencompass.summarizers import DefaultSummarizer
from opencompass.utils import get_logger

from ..report import build_report

__all__ = ["NeedleBenchSummarizer"]


class NeedleBenchSummarizer:
    def __init__(self, config: Any, **kwargs: Any) -> None:
        self.cfg = config
        self.default = DefaultSummarizer(config, **kwargs)

    def summarize(self, output_path: str | None = None, time_str: str | None = None) -> None:
        time_str = time_str or datetime.now().strftime("%Y%m%d_%H%M%S")
        logger = get_logger()
        try:
            self.default.summarize(output_path=output_path, time_str=time_str)
        except Exception as exc:  # keep going: our report reads the per-sample files directly
            logger.warning(f"OpenCompass default summary failed: {exc}")
        run = Path(self.cfg["work_dir"])
        try:
            path = build_report([run], run / "summary")
            logger.info(f"needlebench report: {path}")
        except Exception as exc:
            logger.error(
                f"needlebench report failed ({type(exc).__name__}: {exc}); rebuild it with `needlebench report {run}`"
            )
