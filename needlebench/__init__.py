"""NeedleBench and NeedleChain long-context benchmarks, as an OpenCompass plugin.

The core (generation, scoring, metrics) imports neither OpenCompass nor
mmengine; ``needlebench.opencompass`` holds the thin adapters.
"""

from .sample import DATASET_VERSION, Sample

__all__ = ["DATASET_VERSION", "Sample", "__version__"]
__version__ = "0.1.0"
