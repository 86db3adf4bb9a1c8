"""NeedleBench and NeedleChain long-context benchmarks, as an OpenCompass plugin.

The core (generation, scoring, metrics, planning, the run folder) imports neither OpenCompass nor mmengine;
``needlebench.opencompass`` holds the classes OpenCompass's configs name, each asking the core what to do,
and ``needlebench.runfolder`` owns every file of a run (docs: reference/layout.md).
"""

from .sample import DATASET_VERSION, Sample

__all__ = ["DATASET_VERSION", "Sample", "__version__"]
__version__ = "0.1.0"
