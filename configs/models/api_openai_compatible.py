# Any OpenAI-compatible server: vLLM serve, SGLang, llama.cpp's server, LMDeploy serve.
#   NEEDLEBENCH_API_BASE=http://127.0.0.1:8000/v1 NEEDLEBENCH_API_MODEL=my-model \
#   NEEDLEBENCH_MODELS=models/api_openai_compatible.py opencompass configs/eval_needlebench_32k.py
# NEEDLEBENCH_API_TOKENIZER names the served model's tokenizer (a local folder or hub id), so prompt
# lengths are counted in its tokens; without it OpenCompass tries to load one named like the model.
# NEEDLEBENCH_API_KEY holds the key of a server that asks for one (read per request, never written anywhere).
_base_ = []  # keeps mmengine in plain-Python mode: without it, calls below fail with a bare RuntimeError()

import os

from needlebench.opencompass.models import api_model

models = [
    api_model(
        abbr=os.environ.get("NEEDLEBENCH_API_ABBR", "api-model"),
        model=os.environ.get("NEEDLEBENCH_API_MODEL", "default"),
        base_url=os.environ.get("NEEDLEBENCH_API_BASE", "http://127.0.0.1:8000/v1"),
        # the variable's name, not its value: the key is read when each request is sent, so the config, the
        # run's dump of it and its task files never hold it; unset, the server is sent the key "EMPTY"
        key_env="NEEDLEBENCH_API_KEY" if os.environ.get("NEEDLEBENCH_API_KEY") else None,
        max_seq_len=int(os.environ.get("NEEDLEBENCH_API_MAX_SEQ_LEN", "32768")),
        max_out_len=int(os.environ.get("NEEDLEBENCH_API_MAX_OUT_LEN", "512")),
        tokenizer_path=os.environ.get("NEEDLEBENCH_API_TOKENIZER") or None,
    )
]
