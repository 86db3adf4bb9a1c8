"""The run folder's owner: every ``needlebench_*`` file of a run, when a piece is done, and the run's lifecycle.

No OpenCompass here; the partitioner, the inferencer and the summarizer (``opencompass/``) are adapters that
ask this wing. One module per file or decision:

* ``plan_file``: ``needlebench_plan.json``, the plan with its config digest, datasets' fingerprints and history;
* ``request``: ``needlebench_request.json``, what a command asks of the next infer stage (re-plan, retry, batch);
* ``lifecycle``: the infer stage's start: fresh, resume from the stored plan, re-plan, retry, batch;
* ``pieces``: the one rule for "this piece is done", and prediction files a kill cut short made safe;
* ``predictions``: OpenCompass's prediction files, written and read a sample at a time, and the prompt digest;
* ``carryover``: answers carried into a new plan (``needlebench_reuse.jsonl``) and failed requests asked again;
* ``request_log``, ``retries``: ``needlebench_requests.jsonl`` and ``needlebench_retries.jsonl``;
* ``provider_batch``: OpenAI Batch request files and their results (``batch/<model>/``);
* ``keys``: no API key written into any file of the run;
* ``stopped``: why a stage stopped short (a full disk, a memory limit), read from the folder;
* ``progress_log``: ``needlebench_progress.jsonl``, a step per batch answered (when, how many);
* ``status``: where a run stands, from these files alone (``needlebench status``, the live view);
* ``score_record``: ``needlebench_score.json``, what ``needlebench score`` graded against what.
"""
