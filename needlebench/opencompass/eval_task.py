"""OpenCompass's eval task, reading prediction files one sample at a time and without their prompts.

OpenCompass's ``OpenICLEvalTask`` loads each prediction file whole (``mmengine.load``), prompts
included (``origin_prompt``: every prompt of the dataset), and keeps a second copy of the samples:
at 1 repeat of the 1000k suite an eval task peaked at 5.3 GB. Our evaluator reads only the
predictions (``NeedleBenchEvaluator.score`` takes predictions, references and the dataset rows), so
this task reads the files with :func:`~needlebench.runfolder.predictions.iter_prediction_file`
and drops ``origin_prompt`` as it goes; everything else (parts ``<abbr>_0.json``, ``<abbr>_1.json``,
... merged in order, the evaluation, the result file) is OpenCompass's. Datasets scored by another
evaluator, or by one whose ``score`` asks for ``origin_prompt``, are read by OpenCompass's own code.
One difference: where our evaluator returns an error instead of details (fewer predictions than
samples), OpenCompass would copy every prompt into the result file's ``details``; this task cannot, and
logs that it skipped them. The test set's row loops (OpenCompass's list of references, our grader)
hand the dataset pages they read back every few rows (:mod:`needlebench.cache.pages`), so the task's
RSS does not grow with its prompts either.

``runtime()`` names it as the eval stage's task; ``tests/test_inferencer.py`` checks that the result
files equal OpenCompass's eval task's.
"""

from __future__ import annotations

import argparse
import inspect
import os.path as osp
import sys
import time
from typing import Any

from mmengine.config import Config
from opencompass.registry import ICL_EVALUATORS
from opencompass.tasks.openicl_eval import OpenICLEvalTask  # the module, not the package: task_entry.py
from opencompass.utils import get_infer_output_path, get_logger

from ..cache.pages import releasing
from ..launch.task_entry import through_entry
from ..runfolder.predictions import PROMPT_KEY, dataset_prediction_files, iter_prediction_file

__all__ = ["NeedleBenchEvalTask"]


class NeedleBenchEvalTask(OpenICLEvalTask):
    """``OpenICLEvalTask`` whose memory is the predictions, not the prompts (see the module)."""

    def get_command(self, cfg_path: str, template: str) -> str:
        """OpenCompass's command line with our entry point in place of its script (which would run its own task).

        ``-m`` works both for ``python`` and for ``torch.distributed.run`` (OpenCompass's multi-GPU form);
        the entry point (``task_entry.py``) spares the process OpenCompass's whole dataset and model imports.

        Args:
            cfg_path: the task's config file.
            template: the runner's command template (``{task_cmd}``).
        """
        return through_entry(super().get_command(cfg_path, template), inspect.getfile(OpenICLEvalTask), "eval")

    def _prompts_unused(self) -> bool:
        """Whether this dataset's evaluator is ours and does not ask for the prompts."""
        evaluator = (self.eval_cfg or {}).get("evaluator", {}).get("type")
        cls = ICL_EVALUATORS.get(evaluator) if isinstance(evaluator, str) else evaluator
        if cls is None or not getattr(cls, "__module__", "").startswith("needlebench."):
            return False
        return PROMPT_KEY not in inspect.signature(cls.score).parameters

    def _load_and_preprocess_test_data(self) -> Any:
        """OpenCompass's test set, whose row loop (the references, read row by row) hands its pages back."""
        test_set = super()._load_and_preprocess_test_data()
        return releasing(test_set) if self._prompts_unused() else test_set

    def _load_predictions(self) -> tuple[list[dict[str, Any]], list[Any] | None]:
        """The dataset's samples (``origin_prompt`` left out) and predictions, as OpenCompass's returns them."""
        if not self._prompts_unused():
            return super()._load_predictions()
        filename = get_infer_output_path(self.model_cfg, self.dataset_cfg, osp.join(self.work_dir, "predictions"))
        files = dataset_prediction_files(filename)  # the whole file, or its parts _0, _1, ...
        if not files:
            return super()._load_predictions()  # OpenCompass's error for a missing file
        samples: list[dict[str, Any]] = []
        for path in files:
            try:
                part = {key: _without_prompt(value) for key, value in iter_prediction_file(path)}
                samples.extend(part[str(i)] for i in range(len(part)))
            except (ValueError, KeyError) as exc:  # as OpenCompass: the parts before a broken one are used
                if len(files) == 1:
                    raise
                self.logger.error(f"Error loading prediction file {path}: {exc}")
                break
        if not samples:
            return super()._load_predictions()  # OpenCompass's error for a file without samples
        columns = {key: [sample.get(key) for sample in samples] for key in samples[0]}
        return samples, columns.pop("prediction", None)


def _without_prompt(value: Any) -> Any:
    if isinstance(value, dict):
        value.pop(PROMPT_KEY, None)
    return value


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Score Calculator")
    parser.add_argument("config", help="Config file path")
    args = parser.parse_args()
    start = time.time()
    NeedleBenchEvalTask(Config.fromfile(args.config)).run()
    get_logger().info(f"time elapsed: {time.time() - start: .2f}s")
    sys.exit(0)
