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

OpenCompass's summary is a headline: per needlebench dataset the numbers :data:`~.evaluator.SUMMARY_HEADLINE`
names (score, samples planned and scored, answers cut off, samples failed, effective length), under words a
reader needs no docs for; ``all_metrics=True`` lists every number of the result files under its own name, as
OpenCompass does. A number that is absent reads ``-``, OpenCompass's mark for a missing one, never ``nan``.
The summarizer's options are checked when the run's config is read (``configs.check_summarizer``, called by
the partitioner and ``needlebench plan`` before any model loads): a typo stops the run with the nearest valid option.
"""

from __future__ import annotations

import errno
import math
import traceback
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from opencompass.summarizers import DefaultSummarizer
from opencompass.utils import dataset_abbr_from_cfg, get_logger, model_abbr_from_cfg

from ..aggregate.effective_length import EffectiveRule
from ..errors import OutOfMemory, OutOfSpace
from ..planning.costs import load_prices
from ..report.html import build_report
from ..runfolder.ladder_rounds import pending
from ..runfolder.plan_file import read_plan, resume_command, retry_command
from ..runfolder.retries import failed_requests
from ..runfolder.stopped import check_stages
from ..tasks import is_needlebench
from .configs import SUMMARIZER, check_summarizer
from .evaluator import SUMMARY_HEADLINE

__all__ = ["NeedleBenchSummarizer"]

MISSING = "-"  # OpenCompass's summary's mark for a number it has not got


class NeedleBenchSummarizer:
    """``summarizer=dict(type=NeedleBenchSummarizer)`` in an OpenCompass config.

    Args:
        config: the run's config (OpenCompass passes it).
        effective_length: how the effective context length is read: ``dict(rule="relative", share=0.85)``
            (the default) or ``dict(rule="absolute", threshold=85.6)`` (``aggregate.effective_length``).
        claimed: model abbr -> the context length it claims, where not its ``max_seq_len`` (the default).
        all_metrics: OpenCompass's ``summary_<time>`` files list every number of each dataset's result file
            under its own name (about 20 a dataset); False (the default): the headline (see the module).
        prices: a prices file (``needlebench plan --prices``'s TOML: tokens, or ``device_hour`` for a model on
            your own devices): the run's ledger counts its money at them (``report/ledger.py``).
        **kwargs: OpenCompass's ``DefaultSummarizer`` arguments (``dataset_abbrs``, ``summary_groups``): rows
            the config lists itself are shown as it lists them.

    Raises:
        ConfigError: an unknown option (named with the nearest valid one), an unknown rule or key, or a share
            or threshold out of range.
    """

    def __init__(
        self,
        config: Any,
        effective_length: Mapping[str, Any] | None = None,
        claimed: Mapping[str, int] | None = None,
        all_metrics: bool = False,
        prices: str | None = None,
        **kwargs: Any,
    ) -> None:
        check_summarizer({"type": SUMMARIZER, **kwargs, "all_metrics": all_metrics})
        self.cfg = config
        self.rule = EffectiveRule.of(None if effective_length is None else dict(effective_length))
        self.claimed = None if claimed is None else dict(claimed)
        self.prices = load_prices(prices) if prices is not None else None
        self.default = _OpenCompassSummary(config, all_metrics=all_metrics, **kwargs)

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
            path = build_report([run], run / "summary", rule=self.rule, claimed=self.claimed, prices=self.prices)
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
        due = pending(plan, run) if (plan := read_plan(run)) is not None else {}
        if any(due.values()):  # an adaptive run: `needlebench run` goes on by itself, `opencompass` stops here
            logger.warning(
                f"adaptive run: the ladder asks {sum(due.values())} more prompts "
                f"({', '.join(f'{m}: {n}' for m, n in due.items() if n)}); continue it: {resume_command(run, adaptive=True)}"
            )
        elif due:
            logger.info("adaptive run: every model's ladder is decided")
        failed = sum(failed_requests(run).values())
        if failed:
            logger.warning(
                f"{failed} requests failed and are left out of every score; ask them again, every answered "
                f"sample kept: {retry_command(run)}"
            )


class _OpenCompassSummary(DefaultSummarizer):
    """OpenCompass's ``DefaultSummarizer`` with each needlebench dataset's headline rows, ``-`` for a missing number.

    A config's own ``dataset_abbrs`` are shown as OpenCompass shows them; its ``summary_groups`` rows follow the
    datasets' rows, as in OpenCompass.
    """

    def __init__(self, config: Any, all_metrics: bool, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.headline = not all_metrics and self.dataset_abbrs is None  # the rows are ours to choose

    def _format_table(
        self,
        parsed_results: dict,
        dataset_metrics: dict[str, list[str]],
        dataset_eval_mode: dict[str, str],
        required_dataset_abbrs: list | None = None,
        skip_all_slash: bool = False,
    ) -> list[list[str]]:
        """OpenCompass's table (header, then one row per dataset and metric), on our rows and with our marks."""
        labels: Mapping[str, str] = {}
        if self.headline and required_dataset_abbrs is None:
            required_dataset_abbrs, labels = self._headline_rows(dataset_metrics), dict(SUMMARY_HEADLINE)
        table = super()._format_table(
            parsed_results, dataset_metrics, dataset_eval_mode, required_dataset_abbrs, skip_all_slash
        )
        head, *rows = table
        # a row: dataset, version, metric, mode, then one value per model (OpenCompass writes NaN as "nan", and a
        # count as "6.00": a headline count reads as the whole number it is)
        return [
            head,
            *(
                [*r[:2], labels.get(r[2], r[2]), r[3], *(_cell(v, r[2] in labels and r[2] != "score") for v in r[4:])]
                for r in rows
            ),
        ]

    def _headline_rows(self, dataset_metrics: Mapping[str, Sequence[str]]) -> list[Any]:
        """``dataset_abbrs`` as OpenCompass reads them: each needlebench dataset's headline numbers it reports,
        another dataset's every number, a dataset without results by its name alone (a row of ``-``), then the
        summary groups' numbers."""
        rows: list[Any] = []
        for dataset in self.dataset_cfgs:
            abbr = dataset_abbr_from_cfg(dataset)
            names = dataset_metrics.get(abbr)
            if names is None:
                rows.append(abbr)
            elif is_needlebench(dataset):
                rows += [(abbr, name) for name, _ in SUMMARY_HEADLINE if name in names]
            else:
                rows += [(abbr, name) for name in names]
        listed = {dataset_abbr_from_cfg(d) for d in self.dataset_cfgs}
        rows += [(group, name) for group, names in dataset_metrics.items() if group not in listed for name in names]
        return list(dict.fromkeys(rows))  # a group's numbers are listed once per model

    def _format_raw_txt(self, raw_results: dict[str, dict[str, Any]]) -> str:
        """The ``.txt`` file's raw section: each result as read, the headline's numbers only where the table
        shows the headline, ``-`` for a missing number."""
        ours = {dataset_abbr_from_cfg(d) for d in self.dataset_cfgs if is_needlebench(d)} if self.headline else set()
        headline = {name for name, _ in SUMMARY_HEADLINE}

        def shown(abbr: str, result: Any) -> Any:
            if not isinstance(result, Mapping):
                return result
            kept = {k: v for k, v in result.items() if abbr not in ours or k in headline or not _is_number(v)}
            return {k: MISSING if _is_number(v) and math.isnan(v) else v for k, v in kept.items()}

        return super()._format_raw_txt(
            {model: {abbr: shown(abbr, r) for abbr, r in results.items()} for model, results in raw_results.items()}
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(text: str, count: bool = False) -> str:
    """A value cell of OpenCompass's table: ``-`` where the number is missing (OpenCompass's mark for it), a
    headline count (``count``) without OpenCompass's two decimals where it is a whole number."""
    if text == "nan":
        return MISSING
    return text.removesuffix(".00") if count else text
