"""OpenCompass's ``GenInferencer``, one batch of prompts in memory at a time.

OpenCompass's inferencer renders every prompt of its task into one list before the first request,
and its output handler keeps every prompt again until the task ends: an infer task's memory grows
with its shard (measured at 1 repeat of the 1000k suite: 0.6 GB plus about 11 times the bytes of the
predictions it wrote). Ours renders and sends one batch, appends it to ``tmp_<abbr>.jsonl`` (for a
resume) and to the prediction file being written, and lets it go; the file is renamed into place when
the task ends (``predictions.py``). The dataset pages a batch read are handed back after it
(:mod:`needlebench.cache.pages`), so the task's RSS is a batch too, not its shard's prompt bytes. The files
are OpenCompass's, byte for byte: the same keys, ``origin_prompt`` and order, the same ``tmp_`` file,
and a resume goes on from the samples it holds, as OpenCompass's does. The batches are OpenCompass's
too (the model's ``batch_size``, counted from the first sample not yet predicted), so a model that
pads a batch sees the same inputs. ``tests/test_inferencer.py`` runs both on the same config.

Options it does not take over (``multiround``, ``dump_only_message_path``, ``dump_res_length``,
``dump_timer``) run OpenCompass's own code, with its memory.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from opencompass.openicl.icl_inferencer import GenInferencer
from opencompass.openicl.icl_inferencer.icl_base_inferencer import GenInferencerOutputHandler
from opencompass.utils import batched, get_logger

from ..cache.pages import dataset_mappings, release_mapped
from ..errors import ConfigError
from ..files import atomic_write
from ..launch.task_entry import torch_imported
from ..placement import engine_rope
from ..planning.settings import PROMPT_RECORDS
from ..record import unanswered
from ..request_cost import RequestCost
from ..runfolder.carryover import CarriedAnswer, read_pool
from ..runfolder.cost_log import record_costs
from ..runfolder.predictions import PredictionFile, PredictionLog, digested_entry, prompt_digest
from ..runfolder.progress_log import Step, record_progress
from ..runfolder.provider_batch import batch_line
from ..runfolder.request import BatchMode
from ..runfolder.request_log import record_requests
from ..runfolder.retries import record_retries

__all__ = ["BatchGenInferencer", "REQUEST_ORDER", "loaded_rope"]

# the order every prompt is sent in: the plan's pieces (planning/stream.py), each dataset's rows in their order
REQUEST_ORDER = "needlebench stream: datasets sharing a haystack interleaved, rows in dataset order"


def _no_grad() -> contextlib.AbstractContextManager[Any]:
    """torch's ``no_grad`` where a model imported torch; nothing to switch off in a process without torch."""
    if torch_imported():
        import torch

        return torch.no_grad()
    return contextlib.nullcontext()


def loaded_rope(model: Any) -> dict[str, Any] | None:
    """The RoPE scaling a loaded OpenCompass model answers with, read from its engine's own config of the model.

    Why the engine's and not the run config's: the config asks, the engine decides (a key it does not know is
    dropped, a transformers release renames the field); a context-extension sweep is read by what ran. The
    HuggingFace wrapper's transformers model (``model.model.config``) and vLLM's ``LLM``
    (``llm_engine.model_config.hf_config``) say; an API model asks its server (``served_window``: the context
    it serves, and the scaling where the server shows it); others (scripted models, LMDeploy) give None.

    Args:
        model: the OpenCompass model object.
    """
    served = getattr(model, "served_window", None)
    if callable(served):  # an API model: its server's start flags decide, so the server is asked
        return served()
    return engine_rope(getattr(model, "model", None))


class _Window:
    """A retriever seen through a batch's rows: OpenCompass's prompt builder numbers a batch's rows from 0."""

    def __init__(self, retriever: Any, rows: Sequence[int]) -> None:
        self.retriever = retriever
        self.rows = rows

    def generate_ice(self, idx_list: list[int], ice_template: Any = None) -> Any:
        return self.retriever.generate_ice(idx_list, ice_template=ice_template)

    def generate_prompt_for_generate_task(self, idx: int, ice: Any, **kwargs: Any) -> Any:
        return self.retriever.generate_prompt_for_generate_task(self.rows[idx], ice, **kwargs)


class BatchGenInferencer(GenInferencer):
    """``GenInferencer`` whose memory is one batch of prompts, not its task's shard (see the module).

    Takes ``GenInferencer``'s arguments; set as ``infer_cfg["inferencer"]["type"]`` by our dataset configs.

    Args:
        prompts: ``"text"`` (OpenCompass's entries, ``origin_prompt`` and all) or ``"digest"`` (each entry
            keeps its prompt's digest and sample id instead: ``carryover.digested_entry``); the partitioner
            sets it from ``runtime(prompts=...)``.
        batch: a provider batch to prepare or collect (``runfolder.request.BatchMode`` as data), which the
            partitioner renders into the tasks of the models a ``needlebench batch`` request names; None: online.
        *args: ``GenInferencer``'s.
        **kwargs: ``GenInferencer``'s.
    """

    def __init__(self, *args: Any, prompts: str = "text", batch: dict | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if prompts not in PROMPT_RECORDS:
            raise ConfigError(f"inferencer prompts: {prompts!r}; choose from {PROMPT_RECORDS}")
        self.prompts = prompts
        self.batch = BatchMode.of(batch) if batch is not None else None

    def inference(
        self,
        retriever: Any,
        ice_template: Any = None,
        prompt_template: Any = None,
        output_json_filepath: str | None = None,
        output_json_filename: str | None = None,
    ) -> list[Any]:
        """Predict every row of the retriever's dataset, a batch at a time; write OpenCompass's prediction file.

        Args:
            retriever: OpenCompass's retriever over the task's dataset (its ``test_range`` applied).
            ice_template: in-context example template, if any.
            prompt_template: the prompt template.
            output_json_filepath: the folder of the prediction file.
            output_json_filename: the prediction file's name.

        Returns:
            Every sample's prediction, in order.
        """
        if self.multiround or self.dump_only_message_path or self.dump_res_length or self.dump_timer:
            return super().inference(
                retriever, ice_template, prompt_template, output_json_filepath, output_json_filename
            )
        folder = Path(output_json_filepath or self.output_json_filepath)
        filename = output_json_filename or self.output_json_filename
        saved = PredictionLog.of(folder / filename)
        index = saved.restore()
        pool = read_pool(folder)  # answers a re-plan carried over (carryover.py); empty otherwise
        batch = self.batch
        if batch is not None and hasattr(self.model, "request_bodies"):
            if batch.mode == "prepare":  # the requests written as a batch file; no prediction
                if self.is_main_process:
                    rows = range(index, len(retriever.retrieve()))
                    self._prepare(retriever, ice_template, prompt_template, rows, pool, batch, folder.name, filename)
                return []
            self.model.replay(json.loads(batch.table(folder.name).read_text(encoding="utf-8")))
        if not self.is_main_process:
            rows = range(index, len(retriever.retrieve()))
            self._answer(retriever, ice_template, prompt_template, rows, lambda entries: None, pool)
            return []
        out = PredictionFile(folder / filename)
        failed: list[int] = []  # rows whose request failed (OpenCompass's keys are the rows' numbers)
        seen: set[str] = set()  # the rows the file holds so far (a row asked again counts once)

        def note(entries: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
            failed.extend(int(k) for k, v in entries if unanswered(v.get("prediction")) is not None)
            seen.update(k for k, _ in entries)
            return entries

        try:
            # a resumed task's samples first, as OpenCompass's dict holds them (its failed requests noted)
            out.extend(sample for sample in saved.samples() if note([sample]))
            self._progress(folder, filename, len(seen), 0, failed)

            def keep(entries: list[tuple[str, dict[str, Any]]]) -> None:
                saved.append(entries)
                out.extend(note(entries))
                self._progress(folder, filename, len(seen), len(entries), failed)

            def paid(costs: dict[str, RequestCost]) -> None:
                record_costs(folder, Path(filename).stem, costs)

            rows = range(index, len(retriever.retrieve()))
            self._answer(retriever, ice_template, prompt_template, rows, keep, pool, paid=paid)
            self._ask_again(retriever, ice_template, prompt_template, failed, keep, folder, filename, paid)
            self._record_requests(folder, filename)
        except BaseException:
            out.discard()  # the tmp_ file holds what was answered; a resume writes the file again from it
            raise
        if out.whole:
            predictions = out.finish()
        else:  # a tmp_ file with a key twice: the dict's order and values come from the log
            out.discard()
            predictions = saved.write_json(folder / filename)
        saved.path.unlink(missing_ok=True)
        return predictions

    def _progress(self, folder: Path, filename: str, done: int, new: int, failed: list[int]) -> None:
        """One line of the progress log (``runfolder.progress_log``): what ``needlebench status`` times."""
        count = getattr(self.model, "flow_throttles", None)  # an API model with flow limits (flow.py)
        throttles = int(count()) if callable(count) else 0
        step = Step(Path(filename).stem, time.time(), done, new, len(set(failed)), throttles)
        record_progress(folder, step)

    def _record_requests(self, folder: Path, filename: str) -> None:
        """How this file's requests went out: batch size, most in flight, order, and an API model's flow record."""
        batch = int(self.batch_size or 1)
        flow = getattr(self.model, "flow_summary", None)  # an API model with flow limits (flow.py)
        summary = flow() if callable(flow) else None
        cap = summary["settings"]["max_requests_in_flight"] if summary is not None else None
        if summary is not None:  # our admission: at most the cap, within a batch
            in_flight = min(batch, int(cap)) if cap else batch
        elif getattr(self.model, "max_workers", None):  # OpenCompass's API models: a thread pool per batch
            in_flight = min(batch, int(self.model.max_workers))
        else:  # a local model: one batch at a time
            in_flight = batch
        record_requests(folder, Path(filename).stem, batch, in_flight, REQUEST_ORDER, summary, loaded_rope(self.model))

    def _prepare(
        self,
        retriever: Any,
        ice_template: Any,
        prompt_template: Any,
        rows: Sequence[int],
        pool: Mapping[str, CarriedAnswer],
        batch: BatchMode,
        model: str,
        filename: str,
    ) -> None:
        """Write the task's pending requests as an OpenAI Batch file (``<batch folder>/<model>/<file>.jsonl``).

        Each line's ``custom_id`` is its sample id and its ``body`` what the online path would send
        (``api.ResilientOpenAISDK.request_bodies``); a row with a carried answer is not asked, as online.
        """
        test = retriever.dataset_reader.dataset["test"]
        ids = test["id"]
        bodies: dict[int, Any] = {}

        def ask(prompts: list[Any]) -> list[Any]:
            made = self.model.request_bodies(prompts, self.max_out_len)
            bodies.update((id(b), b) for b in made)
            return made

        target = Path(batch.folder) / model / f"{Path(filename).stem}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(target) as tmp, tmp.open("w", encoding="utf-8") as fh:

            def keep(entries: list[tuple[str, dict[str, Any]]]) -> None:
                for key, sample in entries:
                    if id(sample["prediction"]) in bodies:
                        fh.write(batch_line(str(ids[int(key)]), sample["prediction"]))

            self._answer(retriever, ice_template, prompt_template, rows, keep, pool, ask=ask)
        get_logger().info(f"batch requests written to {target}")

    def _ask_again(
        self,
        retriever: Any,
        ice_template: Any,
        prompt_template: Any,
        failed: list[int],
        keep: Callable[[list[tuple[str, dict[str, Any]]]], None],
        folder: Path,
        filename: str,
        paid: Callable[[dict[str, RequestCost]], None] | None = None,
    ) -> None:
        """Ask the rows whose request failed again, after a cool-down, with fewer in flight each pass.

        The model's ``retry_passes`` (passes after the first; 0 or none: never) and ``retry_waits`` (seconds
        before each pass; the last repeats) say how (``models.api_model``). An answer replaces the failed
        one in the task's files (the log keeps both; the prediction file holds the last). What was asked
        again and how it ended is appended to ``<folder>/needlebench_retries.jsonl``
        (:func:`~needlebench.retries.record_retries`).
        """
        passes = int(getattr(self.model, "retry_passes", 0) or 0)
        if not failed:
            return
        waits = tuple(float(w) for w in (getattr(self.model, "retry_waits", None) or (0.0,)))
        logger = get_logger()
        first, asked, done = len(set(failed)), 0, 0
        batch = self.batch_size or 1
        for number in range(passes):
            rows = sorted(set(failed))
            if not rows:
                break
            wait = waits[min(number, len(waits) - 1)]
            batch = max(1, batch // 2)
            logger.warning(
                f"{len(rows)} requests failed; asking them again in {wait:g} s ({number + 1} of {passes}, "
                f"{batch} at a time)"
            )
            time.sleep(wait)
            failed.clear()
            self._answer(retriever, ice_template, prompt_template, rows, keep, batch=batch, paid=paid)
            asked, done = asked + len(rows), number + 1
            logger.warning(f"asked again: {len(rows)}; answered now: {len(rows) - len(set(failed))}")
        left = len(set(failed))
        if left:
            logger.warning(f"{left} requests still failed after {done} more passes; they are recorded as failed")
        record_retries(folder, Path(filename).stem, first=first, asked=asked, passes=done, still_failed=left)

    def _answer(
        self,
        retriever: Any,
        ice_template: Any,
        prompt_template: Any,
        rows: Sequence[int],
        keep: Callable[[list[tuple[str, dict[str, Any]]]], None],
        pool: Mapping[str, CarriedAnswer] | None = None,
        batch: int | None = None,
        ask: Callable[[list[Any]], list[Any]] | None = None,
        paid: Callable[[dict[str, RequestCost]], None] | None = None,
    ) -> None:
        """Render, send and hand to ``keep`` these rows, one batch at a time.

        A row whose sample id has a carried answer (``pool``) for the very prompt rendered now is not sent:
        its answer is kept as it was saved.

        Args:
            retriever: OpenCompass's retriever over the task's dataset.
            ice_template: in-context example template, if any.
            prompt_template: the prompt template.
            rows: the rows to ask, in order (from the first not predicted yet, or the failed ones).
            keep: takes each batch's ``(key, sample dict)`` pairs, as OpenCompass's output handler makes them.
            pool: carried answers by sample id with their prompts' digests (``carryover.read_pool``).
            batch: prompts per batch; default the model's ``batch_size``.
            ask: what answers a batch's parsed prompts (``parse_template``'s, made once here); default the
                model's ``generate_from_template`` on their templates.
            paid: takes each batch's request costs by sample id (``runfolder.cost_log``); None: not kept (a dataset
                without ids, which no needlebench dataset is).
        """
        ice_idx_list = retriever.retrieve()  # one (empty, for ZeroRetriever) list per row: no prompt yet
        reader = retriever.dataset_reader
        golds = reader.dataset["test"][reader.output_column] if reader.output_column else None
        mapped = dataset_mappings(reader.dataset["test"])  # its own mapping only (not a model's index of it)
        extra: dict[str, Any] = {}
        parameters = inspect.signature(self.model.generate).parameters
        if "stopping_criteria" in parameters:
            extra["stopping_criteria"] = self.stopping_criteria
        if "min_out_len" in parameters:
            extra["min_out_len"] = self.min_out_len
        # a model that splits a prompt where its question starts (a KV-cache press): told by each row
        metas = reader.dataset["test"].select_columns(["meta", "prompt"]) if "questions" in parameters else None
        returns = getattr(self.model, "generation_kwargs", {}).get("num_return_sequences", 1)
        batch = batch or self.batch_size or 1
        logger = get_logger()
        logger.info(f"Starting inference: {len(rows)} prompts, {batch} at a time")
        test = reader.dataset["test"]
        keyed = (pool or self.prompts == "digest") and "id" in test.column_names
        ids = test["id"] if keyed else None
        named = ids if ids is not None or paid is None or "id" not in test.column_names else test["id"]
        carried_total = 0
        for at in range(0, len(rows), batch):
            chunk = list(rows[at : at + batch])
            entry = self.get_generation_prompt_list_from_retriever_indices(
                [ice_idx_list[i] for i in chunk],
                _Window(retriever, chunk),
                self.gen_field_replace_token,
                max_seq_len=self.max_seq_len,
                ice_template=ice_template,
                prompt_template=prompt_template,
            )
            with _no_grad():
                parsed = self.model.parse_template(entry, mode="gen")
                carried = _carried(parsed, [ids[i] for i in chunk], pool) if keyed and pool else {}
                asked = [i for i in range(len(parsed)) if i not in carried]
                clock = _Clock(self.model)
                if not asked:
                    generated = []
                elif ask is not None:
                    generated = ask([parsed[i] for i in asked])
                else:
                    templates = [entry[i] for i in asked]
                    if metas is not None:
                        extra["questions"] = [_question(metas[chunk[i]]) for i in asked]
                    generated = self.model.generate_from_template(templates, max_out_len=self.max_out_len, **extra)
            costs = dict(zip(asked, clock.costs([parsed[i] for i in asked]), strict=False))
            answers = dict(zip(asked, batched(generated, returns), strict=False))
            carried_total += len(carried)
            handler = GenInferencerOutputHandler()  # OpenCompass's sample dict, for this batch only
            for offset, prompt in enumerate(parsed):
                row = chunk[offset]
                gold = golds[row] if golds is not None else None
                if offset in carried:
                    prediction = carried[offset]
                else:
                    prediction = answers[offset][0] if returns == 1 else answers[offset]
                handler.save_results(prompt, prediction, row, gold=gold)
            entries = list(handler.results_dict.items())
            if self.prompts == "digest" and keyed:
                entries = [(key, digested_entry(value, ids[row])) for (key, value), row in zip(entries, chunk)]
            keep(entries)
            if paid is not None and named is not None:  # an answer carried over has none: this run did not pay
                paid({str(named[chunk[offset]]): cost for offset, cost in costs.items() if cost is not None})
            release_mapped(mapped)  # this batch's prompts leave the task's RSS with it
            end = at + len(chunk)
            if (end // batch) % 100 == 0 or end == len(rows):
                logger.info(f"{end} of {len(rows)} prompts answered")
        if carried_total:
            logger.info(f"{carried_total} answers carried over from the run's earlier plan, not asked again")


# the package whose version is an in-process engine's, by a word of its OpenCompass class's name
_ENGINE_PACKAGES = (
    ("KVPress", "kvpress"),
    ("VLLM", "vllm"),
    ("TurboMind", "lmdeploy"),
    ("HuggingFace", "transformers"),
)


class _Clock:
    """One batch's clock: started when the batch is sent, read when its answers are back.

    Each answer's cost is the model's own where it measured one per request (``request_costs``: an API model);
    else the batch's wall time shared over its prompts by their length, with the batch's peak device memory
    where torch reports it, and the engine package's version (``needlebench.request_cost``).
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        if hasattr(model, "request_costs"):
            model.request_costs = []  # a batch that sends nothing leaves none of the last batch's behind
        self.outputs = _vllm_outputs(model)  # in-process vLLM: the RequestOutputs its batch returns
        if self.outputs is not None:
            self.outputs.clear()
        self.cuda = _cuda()
        if self.cuda is not None:
            self.cuda.reset_peak_memory_stats()
        self.started = time.perf_counter()

    def costs(self, prompts: Sequence[Any]) -> list[RequestCost | None]:
        """Each prompt's cost, in order.

        Args:
            prompts: the batch's prompts as sent (parsed), in order.
        """
        wall = time.perf_counter() - self.started
        told = getattr(self.model, "request_costs", None)
        if isinstance(told, list) and len(told) == len(prompts) and prompts:
            return told
        peak = self.cuda.max_memory_allocated() / 2**20 if self.cuda is not None else None
        engine, version = _engine(self.model)
        sizes = [_size(p) for p in prompts]
        total = sum(sizes) or 1
        said = list(self.outputs) if self.outputs is not None and len(self.outputs) == len(prompts) else []
        return [
            RequestCost(
                wall_s=wall * n / total,
                shared=True,
                peak_memory_mb=peak,
                engine=engine,
                engine_version=version,
                **(_request_output_facts(said[i]) if said else {}),
            )
            for i, n in enumerate(sizes)
        ]


def _vllm_outputs(model: Any) -> list[Any] | None:
    """Where an in-process vLLM model (OpenCompass's ``VLLMwithChatTemplate``) keeps the ``RequestOutput`` list its
    last ``generate`` returned: its ``vllm.LLM``'s ``generate`` is wrapped once to keep them (OpenCompass's model
    returns only the texts); None for any other model."""
    llm = getattr(model, "model", None)
    if _engine(model)[0] != "vllm" or not callable(getattr(llm, "generate", None)):
        return None
    kept = getattr(llm, "_needlebench_outputs", None)
    if kept is None:
        kept, generate = [], llm.generate

        def keeping(*args: Any, **kwargs: Any) -> Any:
            outputs = generate(*args, **kwargs)
            kept[:] = list(outputs)
            return outputs

        llm.generate, llm._needlebench_outputs = keeping, kept
    return kept


def _request_output_facts(output: Any) -> dict[str, Any]:
    """What a vLLM ``RequestOutput`` says its request cost: its prompt's tokens, those served from the prefix cache
    (``num_cached_tokens``), and where stats are kept (``metrics``: v1's ``*_ts`` stamps or v0's ``*_time``), the
    queue, first-token and decode milliseconds; a fact it does not carry stays None."""
    tokens = getattr(output, "prompt_token_ids", None)
    cached = getattr(output, "num_cached_tokens", None)
    out: dict[str, Any] = {
        "prompt_tokens": len(tokens) if tokens is not None else None,
        "cached_tokens": cached if isinstance(cached, int) and not isinstance(cached, bool) else None,
    }
    metrics = getattr(output, "metrics", None)

    def stamp(name: str) -> float | None:
        value = getattr(metrics, name, None)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value else None

    # one clock per scheme: v1's engine-core stamps (monotonic), or v0's wall-clock times, never mixed
    names = ("queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts")
    if not hasattr(metrics, "scheduled_ts"):
        names = ("arrival_time", "first_scheduled_time", "first_token_time", "last_token_time")
    queued, scheduled, first, last = (stamp(n) for n in names)
    if queued is not None and scheduled is not None:
        out["queue_ms"] = (scheduled - queued) * 1000
    if scheduled is not None and first is not None:
        out["ttft_ms"] = (first - scheduled) * 1000
    if first is not None and last is not None:
        out["decode_ms"] = (last - first) * 1000
    return {k: v for k, v in out.items() if v is not None}


def _size(prompt: Any) -> int:
    """A prompt's length in characters (a chat prompt's turns summed), for sharing its batch's clock."""
    if isinstance(prompt, str):
        return len(prompt)
    return sum(len(str(m.get("prompt", ""))) if isinstance(m, dict) else len(str(m)) for m in prompt)


def _cuda() -> Any:
    """torch's CUDA module where a model imported torch and a GPU is there; None elsewhere (no peak to read)."""
    if not torch_imported():
        return None
    import torch

    return torch.cuda if torch.cuda.is_available() else None


@functools.cache
def _engine_of(name: str) -> tuple[str, str | None]:
    from importlib import metadata

    for word, package in _ENGINE_PACKAGES:
        if word in name:
            try:
                return package, metadata.version(package)
            except metadata.PackageNotFoundError:
                return package, None
    return name, None


def _engine(model: Any) -> tuple[str, str | None]:
    """(engine, version) of an in-process model: its engine package and that package's version, else its class."""
    return _engine_of(type(model).__name__)


def _question(row: Mapping[str, Any]) -> str | None:
    """A row's question: its prompt's last ``meta["question_chars"]`` characters, if its task says where it starts.

    The text itself, not its length: the turn a model is given holds the prompt and what the template adds after
    it (a newline under OpenCompass's v2 template), so a count from the turn's end would start it late.
    """
    value = json.loads(row["meta"]).get("question_chars") if row["meta"] else None
    if value is None:
        return None
    prompt = row["prompt"]
    if not 0 < int(value) <= len(prompt):
        raise ConfigError(f"question_chars {value} does not fit the row's prompt ({len(prompt)} characters)")
    return prompt[-int(value) :]


def _carried(parsed: list[Any], ids: list[str], pool: Mapping[str, CarriedAnswer]) -> dict[int, Any]:
    """The batch's rows (by offset) whose carried answer was given for the prompt rendered now, and that answer."""
    out = {}
    for offset, (prompt, sample_id) in enumerate(zip(parsed, ids, strict=False)):
        hit = pool.get(sample_id)
        if hit is not None and hit[0] == prompt_digest(prompt):
            out[offset] = hit[1]["prediction"]
    return out
