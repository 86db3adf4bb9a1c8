"""Loaded by every Python process of the built-in benchmark run (PYTHONPATH).

OpenCompass's built-in M-RS loader calls ``hf_hub_download`` for
opencompass/NeedleBench on every dataset build; there is no network here, so
answer from the stand-in files in ./data/needlebench instead.
"""

import os

try:
    import huggingface_hub

    _original = huggingface_hub.hf_hub_download

    def _local(repo_id, filename, *args, **kwargs):
        if repo_id == "opencompass/NeedleBench":
            return os.path.join(os.getcwd(), "data", "needlebench", filename)
        return _original(repo_id, filename, *args, **kwargs)

    huggingface_hub.hf_hub_download = _local
except ImportError:
    pass
