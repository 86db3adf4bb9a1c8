"""OpenCompass summarizer: the usual summary files plus our tables, figures and report.html.

It first runs OpenCompass's DefaultSummarizer (so ``summary_<time>.csv``
still appears), then writes ``needlebench_summary.csv``, the ATC and
NeedleChain tables, PNG figures and ``report.html`` into the run's
``summary/`` folder. A failure in the default summary never hides our
report; a failure in our report is logged with its traceback and raised,
after the default summary is written, so ``opencompass`` exits non-zero
instead of reporting success with tables missing. A stage that a full disk
or a memory limit stopped ends the run here, before any table (``stopped.py``). A full disk is one message
naming the file and the space (exit code 1, no traceback), and OpenCompass's
own summary files of this run, which it writes in place, are removed when the
disk filled under them, so no cut table is left behind.
"""

from __future__ import annotations

import errno
import traceback
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from opencompass.summarizers import DefaultSummarizer
from opencompass.utils import get_logger, model_abbr_from_cfg

from ..aggregate.effective_length import EffectiveRule
from ..errors import OutOfMemory, OutOfSpace
from ..report.html import build_report
from ..runfolder.retries import failed_requests
from ..runfolder.stopped import check_stages

__all__ = ["NeedleBenchSummarizer"]


class NeedleBenchSummarizer:
    """``summarizer=dict(type=NeedleBenchSummarizer)`` in an OpenCompass config.

    Args:
        config: the run's config (OpenCompass passes it).
        effective_length: how the effective context length is read: ``dict(rule="relative", share=0.85)``
            (the default) or ``dict(rule="absolute", threshold=85.6)`` (``aggregate.effective_length``).
        claimed: model abbr -> the context length it claims, where not its ``max_seq_len`` (the default).
        **kwargs: OpenCompass's ``DefaultSummarizer`` arguments.

    Raises:
        ConfigError: an unknown rule or key, or a share or threshold out of range.
    """

    def __init__(
        self,
        config: Any,
        effective_length: Mapping[str, Any] | None = None,
        claimed: Mapping[str, int] | None = None,
        **kwargs: Any,
    ) -> None:
        self.cfg = config
        self.rule = EffectiveRule.of(None if effective_length is None else dict(effective_length))
        self.claimed = None if claimed is None else dict(claimed)
        self.default = DefaultSummarizer(config, **kwargs)

    def summarize(self, output_path: str | None = None, time_str: str | None = None) -> None:
        """Write OpenCompass's summary, then ours.

        Args:
            output_path: where OpenCompass's summary goes (its default when None).
            time_str: the run's time stamp, used in OpenCompass's file names.

        Raises:
            Exception: whatever made our tables or report fail, after it is logged.
        """
        time_str = time_str or datetime.now().strftime("%Y%m%d_%H%M%S")
        logger = get_logger()
        try:  # a stage that a full disk or a memory limit stopped: one message, not tables with holes
            check_stages(
                self.cfg["work_dir"], [model_abbr_from_cfg(m) for m in self.cfg["models"]], self.cfg["datasets"]
            )
        except (OutOfSpace, OutOfMemory) as exc:
            logger.error(str(exc))
            raise SystemExit(f"needlebench: {exc}") from None
        try:
            self.default.summarize(output_path=output_path, time_str=time_str)
        except Exception as exc:  # keep going: our report reads the per-sample files directly
            logger.warning(f"OpenCompass default summary failed: {exc}\n{traceback.format_exc()}")
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                folder = Path(output_path).parent if output_path else Path(self.cfg["work_dir"]) / "summary"
                for cut in folder.glob(f"summary_{time_str}.*"):  # written in place: may be cut short
                    cut.unlink(missing_ok=True)
        run = Path(self.cfg["work_dir"])
        try:
            path = build_report([run], run / "summary", rule=self.rule, claimed=self.claimed)
        except OutOfSpace as exc:
            logger.error(f"report stage stopped: {exc}")
            raise SystemExit(f"needlebench: report stage stopped: {exc}") from None
        except Exception as exc:
            logger.error(
                f"needlebench report failed ({type(exc).__name__}: {exc}); fix the cause and rebuild it "
                f"with `needlebench report {run}`\n{traceback.format_exc()}"
            )
            raise
        logger.info(f"needlebench report: {path}")
        failed = sum(failed_requests(run).values())
        if failed:
            logger.warning(
                f"{failed} requests failed and are left out of every score; ask them again, every answered "
                f"sample kept: needlebench retry {run}"
            )
