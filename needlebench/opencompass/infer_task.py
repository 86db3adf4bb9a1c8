"""OpenCompass's infer task, started through our entry point (``task_entry.py``).

The task itself is OpenCompass's ``OpenICLInferTask``, unchanged; only the command its runner starts
differs: ``python -m needlebench.launch.task_entry infer CONFIG`` instead of OpenCompass's script, so
the process does not import every dataset and model OpenCompass ships before its first sample.
``runtime()`` names it as the infer stage's task.
"""

from __future__ import annotations

import inspect

from opencompass.tasks.openicl_infer import OpenICLInferTask

from ..launch.task_entry import through_entry

__all__ = ["NeedleBenchInferTask"]


class NeedleBenchInferTask(OpenICLInferTask):
    """``OpenICLInferTask`` started through ``task_entry`` (see the module)."""

    def get_command(self, cfg_path: str, template: str) -> str:
        """OpenCompass's command line with our entry point in place of its script.

        ``-m`` works both for ``python`` and for ``torch.distributed.run`` (OpenCompass's multi-GPU form).

        Args:
            cfg_path: the task's config file.
            template: the runner's command template (``{task_cmd}``).
        """
        return through_entry(super().get_command(cfg_path, template), inspect.getfile(OpenICLInferTask), "infer")
