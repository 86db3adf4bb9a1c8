"""Checks made before the first request or job of a stage: one message now, not hours of failures later.

``api_server``: an OpenAI-compatible server is up, serves the model's name and holds ``max_seq_len``;
``slurm``: the Slurm client works and the partition exists; ``devices``: this machine shows the GPUs each model's tasks
ask for, counted as OpenCompass's ``LocalRunner`` counts them. The partitioner runs them (no OpenCompass here).
"""
