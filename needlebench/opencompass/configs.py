"""Config builders: one small function per suite family returns dataset dicts; ``runtime()`` the stages.

Users change lengths, depths, repeats, languages or prompt options in one
call; a profile's numbers (suites, buffers, metric, recall step) are read from
its ``profiles.Profile`` record, never copied here. ``runtime()`` writes the
run's settings (``planning.settings.RunSettings``, checked once) into both
stages' partitioner sections. Nothing here mutates imported objects, so configs behave the same
under ``Config.fromfile`` and plain import. Types are dotted strings: our
configs run in mmengine's plain-Python mode (so they may call these
functions), where OpenCompass can dump strings but not class objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, unknown_option_error
from ..planning.settings import RunSettings
from ..protocol import ProtocolParams
from ..scoring import ScoreOptions
from ..tasks import all_tasks, get_task, is_needlebench, make_params
from ..tasks.profiles import get_profile
from ..tasks.sparse.retrieval import LANGS

__all__ = [
    "load_config",
    "needlebench_datasets",
    "atc_datasets",
    "needlechain_datasets",
    "atc_mc_datasets",
    "task_dataset",
    "suite_tasks",
    "raw_messages",
    "check_raw_messages",
    "TEMPLATES",
]

PROMPT_TEMPLATE = "opencompass.openicl.icl_prompt_template.PromptTemplate"
# OpenCompass 0.5.4's *_rawprompt.py configs: one OpenAI-style user message, passed through unparsed
RAW_PROMPT_TEMPLATE = "opencompass.openicl.icl_raw_prompt_template.RawPromptTemplate"
RAW_MESSAGES = ({"role": "user", "content": "{prompt}"},)
# the dataset templates: OpenCompass's PromptTemplate configs ("prompt") or its RawPromptTemplate ones ("raw")
TEMPLATES = ("prompt", "raw")
ZERO_RETRIEVER = "opencompass.openicl.icl_retriever.ZeroRetriever"
# OpenCompass's GenInferencer and eval task with one batch (one sample) in memory, writing the same files
GEN_INFERENCER = "needlebench.opencompass.inferencer.BatchGenInferencer"
EVAL_TASK = "needlebench.opencompass.eval_task.NeedleBenchEvalTask"
INFER_TASK = "needlebench.opencompass.infer_task.NeedleBenchInferTask"
DATASET = "needlebench.opencompass.dataset.NeedleBenchDataset"
PARTITIONER = "needlebench.opencompass.partitioner.NeedleBenchPartitioner"
SUMMARIZER = "needlebench.opencompass.summarizer.NeedleBenchSummarizer"
EVALUATOR = "needlebench.opencompass.evaluator.NeedleBenchEvaluator"


def suite_tasks() -> tuple[str, ...]:
    """The tasks a suite config builds (those with ``suite_defaults``), in registry order: S-RT, M-RT, M-RS."""
    return tuple(spec.name for spec in all_tasks() if spec.suite_defaults)


# The answer turn of OpenCompass v2's S-RT, M-RT and M-RS templates. A chat model's template parser starts
# generating at the BOT turn, so it adds nothing there; a model without a meta template (a base model) gets the
# turns joined by newlines, and the answer emptied: the prompt then ends with "\n\n", as OpenCompass sends it.
ANSWER_TURN = dict(role="BOT", prompt="{answer}\n")


def _infer_cfg(
    max_out_len: int | None, system: bool = False, answer_turn: bool = False, template: str = "prompt"
) -> dict[str, Any]:
    """OpenCompass's generation settings. Without ``max_out_len`` the model's own budget applies.

    OpenCompass's infer task gives the inferencer the model's ``max_out_len`` only when the
    dataset sets none, so a dataset default would silently cut a reasoning model's output.
    ``answer_turn`` ends the template with OpenCompass's answer turn (``ANSWER_TURN``), where its own
    template has one, so every kind of model gets the input OpenCompass gives it. ``template="raw"``
    is OpenCompass's ``RawPromptTemplate`` with the one user message of its ``*_rawprompt.py`` configs.
    """
    inferencer: dict[str, Any] = dict(type=GEN_INFERENCER)
    if max_out_len:
        inferencer["max_out_len"] = int(max_out_len)
    if template == "raw":
        prompt_template = dict(type=RAW_PROMPT_TEMPLATE, messages=[dict(m) for m in RAW_MESSAGES])
    else:
        rounds: dict[str, Any] = {"round": [dict(role="HUMAN", prompt="{prompt}")]}
        if answer_turn:
            rounds["round"].append(dict(ANSWER_TURN))
        if system:
            rounds["begin"] = [dict(role="SYSTEM", fallback_role="HUMAN", prompt="{system}")]
        prompt_template = dict(type=PROMPT_TEMPLATE, template=rounds)
    return dict(
        prompt_template=prompt_template,
        retriever=dict(type=ZERO_RETRIEVER),
        inferencer=inferencer,
    )


def task_dataset(
    abbr: str,
    task: str,
    params: dict[str, Any],
    max_out_len: int | None = None,
    evaluator: dict[str, Any] | None = None,
    system: bool = False,
    answer_turn: bool = False,
    template: str = "prompt",
) -> dict[str, Any]:
    """One OpenCompass dataset entry for a needlebench task, its parameters checked now.

    Args:
        abbr: the dataset's name in OpenCompass's outputs.
        task: a registered task name.
        params: the task's parameters (a typo or a bad value is a ``ConfigError`` here, not in a subprocess).
        max_out_len: an output budget for this dataset; ``None`` leaves it to the model config.
        evaluator: extra evaluator settings.
        system: the task has a system prompt column.
        answer_turn: the template ends with OpenCompass's answer turn (``ANSWER_TURN``), as its v2 S-RT,
            M-RT and M-RS templates do (a base model's input then ends as OpenCompass's does).
        template: ``"prompt"`` (OpenCompass's ``PromptTemplate`` configs) or ``"raw"`` (its
            ``RawPromptTemplate`` ones: one user message holding the prompt; API models only).

    Raises:
        ConfigError: a bad parameter or an unknown template.
    """
    if template not in TEMPLATES:
        raise ConfigError(f"template: {template!r}; choose from {TEMPLATES}")
    if template == "raw" and system:
        raise ConfigError(f"template: 'raw' is one user message; {abbr} has a system turn")
    checked = make_params(task, **params)
    if isinstance(checked, ProtocolParams):  # protocol options are checked where the config is written
        checked.options()
    columns = ["prompt", "system"] if system else ["prompt"]
    return dict(
        abbr=abbr,
        type=DATASET,
        task=task,
        **params,
        reader_cfg=dict(input_columns=columns, output_column="answer"),
        infer_cfg=_infer_cfg(max_out_len, system, answer_turn, template),
        eval_cfg=dict(evaluator=dict(type=EVALUATOR, **(evaluator or {}))),
    )


def raw_messages(dataset: Mapping[str, Any]) -> bool:
    """Whether a dataset config sends OpenCompass's raw messages (``template="raw"``, or a ``RawPromptTemplate``).

    Args:
        dataset: a dataset config.
    """
    prompt_template = ((dataset.get("infer_cfg") or {}).get("prompt_template")) or {}
    kind = prompt_template.get("type")
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", "")
    return name.rsplit(".", 1)[-1] == "RawPromptTemplate"


def check_raw_messages(model: Mapping[str, Any], datasets: Sequence[Mapping[str, Any]]) -> None:
    """Refuse raw messages for a model OpenCompass cannot send them to, before any model call.

    OpenCompass 0.5.4 passes a ``RawPromptTemplate``'s messages to the model unparsed: its OpenAI-style API
    models send them as they are, but its HuggingFace, vLLM and LMDeploy chat-template models fail on them
    (``KeyError: 'prompt'`` in ``_convert_chat_messages``) and its base models' template parser asserts
    (``tests/test_model_input.py`` shows both). There are no OpenCompass bytes to reproduce there.

    Args:
        model: the model config.
        datasets: the datasets it runs.

    Raises:
        ConfigError: a raw-message dataset given to a model without an OpenAI-compatible endpoint.
    """
    from ..planning.limits import is_api_model

    raw = [str(d.get("abbr")) for d in datasets if raw_messages(d)]
    if raw and not is_api_model(model):
        raise ConfigError(
            f"model {model.get('abbr', 'model')}: datasets {raw[:3]}{' ...' if len(raw) > 3 else ''} use "
            "template='raw' (OpenCompass's RawPromptTemplate), which OpenCompass 0.5.4 sends to API models only "
            "(its chat-template models fail on raw messages, its base models assert); use the default "
            "template='prompt' for a local model, or serve it over an OpenAI-compatible endpoint (api_model)"
        )


def _scoring(**given: Any) -> dict[str, Any]:
    """The scoring options a builder was given (None: not given), checked once, against their one declaration
    (:data:`~needlebench.scoring.SCORING_OPTIONS`), where the config is read; the evaluator gets these.

    Args:
        given: option name -> value.

    Raises:
        ConfigError: a value its option does not take.
    """
    chosen = {k: v for k, v in given.items() if v is not None}
    try:
        ScoreOptions.of(chosen)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return chosen


def _per_task(value: Any, task: str, default: Any) -> Any:
    """A setting given once for every task, or as ``{task: value}``."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(suite_tasks()))
        if unknown:
            raise unknown_option_error("per-task setting", unknown, suite_tasks(), what="task")
        return value.get(task, default)
    return default if value is None else value


def needlebench_datasets(
    suite: str = "128k",
    tasks: Sequence[str] | None = None,
    langs: Sequence[str] = LANGS,
    lengths: Sequence[int] | None = None,
    depths: Sequence[float] | None = None,
    repeats: int | dict[str, int] | None = None,
    profile: str = "v2",
    protocol: str = "reference",
    seed: int = 0,
    corpus: str = "packaged",
    question_position: str = "end",
    recall_step: bool | None = None,
    metric: str | None = None,
    max_out_len: int | dict[str, int] | None = None,
    truncated: str | None = None,
    template: str = "prompt",
    reasoning_apart: str | None = None,
    **task_options: Any,
) -> list[dict[str, Any]]:
    """The sparse-task datasets of a suite: one dataset per (task, language), every cell inside.

    Args:
        suite: ``4k``, ``8k``, ``32k``, ``128k``, ``200k``, ``256k`` or ``1000k`` (OpenCompass's); with ``profile="v2"``
            also ``2000k``, ``4000k`` and ``8000k``, rungs past 1M beyond OpenCompass's protocol (its configs stop at
            1000k; the summary notes every cell past it).
        tasks: any of ``srt``, ``mrt``, ``mrs`` (default: all of them).
        langs: any of ``en``, ``zh``.
        lengths: context lengths in cl100k tokens (default: the suite's, per profile).
        depths: needle depths 0..100 (default: the suite's, per profile).
        repeats: samples per cell, one number or ``{task: n}`` (default S-RT 10, M-RT 25, M-RS 10).
        profile: ``v2`` (2025 paper, OpenCompass ``needlebench_v2``) or ``v1`` (2024 paper: its lengths,
            depths and buffers, the recall-step guide and Levenshtein scoring).
        protocol: ``reference`` (the papers' and OpenCompass's prompts, budgets and scoring) or
            ``clarified`` (ours; docs/protocol/reference-vs-clarified.md).
        seed: every random choice derives from it and the sample's coordinates.
        corpus: ``packaged``, ``opencompass`` or ``auto`` (haystack text source).
        question_position: ``end`` or ``start``.
        recall_step: ask the model to recall the relevant sentence first (default: on for v1).
        metric: ``keyword`` or ``levenshtein`` (default: keyword, but levenshtein for v1 S-RT, as
            OpenCompass v1 scores it).
        max_out_len: an output budget per dataset (one number or ``{task: n}``); default: the model's.
        truncated: how an output cut off at its budget counts: ``"scored"`` as its text reads (OpenCompass),
            ``"unscored"`` (left out of every number as ``truncated``); default: by the protocol (unscored
            under clarified). Cut-off outputs are flagged and counted either way.
        template: how the prompt reaches the model: ``"prompt"`` (OpenCompass's ``PromptTemplate`` configs,
            ``needlebench_{suite}.py``: HUMAN and BOT turns through the model's meta template) or ``"raw"``
            (its ``needlebench_{suite}_rawprompt.py`` configs, v1: one OpenAI-style user message passed
            through unparsed, which OpenCompass 0.5.4 sends to API models only; a local model is refused
            when the run is planned).
        reasoning_apart: what is scored of an answer whose reasoning the server returned apart
            (``reasoning_content``): ``"answer"`` alone (default), or ``"joined"``, OpenCompass's text
            (reasoning, ``</think>``, answer), for parity checks (docs/protocol/differences.md).
        **task_options: a task parameter for every task (e.g. ``prompt_style="clarified"``,
            ``num_needles=[3]``) or ``srt=dict(...)``/``mrt=dict(...)``/``mrs=dict(...)`` for one task (which
            may also replace a suite value for that task, e.g. ``mrt=dict(depths=[...])``).

    Raises:
        ConfigError: an unknown suite, task, language, option or parameter, naming the valid ones.
    """
    chosen_profile = get_profile(profile)
    spec = chosen_profile.suite(suite)
    known = suite_tasks()
    tasks = known if tasks is None else tasks
    for t in tasks:
        if t not in known:
            raise ConfigError(f"tasks: unknown sparse task {t!r}; choose from {known}")
    for lang in langs:
        if lang not in LANGS:
            raise ConfigError(f"langs: unknown language {lang!r}; choose from {LANGS}")
    per_task = {t: task_options.pop(t) for t in known if t in task_options}
    for t, opts in per_task.items():
        if not isinstance(opts, dict):
            raise ConfigError(f"{t}: per-task options must be a dict, got {type(opts).__name__}")
    for where, opts in (("needlebench_datasets", task_options), *per_task.items()):
        if "lang" in opts:
            raise ConfigError(f"{where}: lang= is not an option; set languages with langs=[...] (a dataset each)")
    recall = chosen_profile.recall_step if recall_step is None else bool(recall_step)
    out = []
    for task in tasks:
        task_spec = get_task(task)
        for lang in langs:
            defaults = task_spec.suite_defaults(suite, lang, profile)
            params = dict(  # the suite's values; the options given for every task, then for this task, win
                lang=lang,
                lengths=list(lengths or spec.lengths),
                depths=list(depths if depths is not None else spec.depths),
                repeats=_per_task(repeats, task, defaults["repeats"]),
                **{k: v for k, v in defaults.items() if k != "repeats"},  # the task's own suite values
                seed=seed,
                corpus=corpus,
                question_position=question_position,
                recall_step=recall,
                protocol=protocol,
                profile=profile,
            )
            params.update(task_options)
            params.update(per_task.get(task, {}))
            chosen = metric or chosen_profile.scoring.get(task, {}).get("metric", "keyword")
            evaluator = _scoring(
                **({"metric": chosen} if "metric" in task_spec.score_options else {}),
                truncated=truncated,
                reasoning_apart=reasoning_apart,
            )
            out_len = _per_task(max_out_len, task, None)
            abbr = f"needlebench_{task}_{lang}_{suite}"
            out.append(task_dataset(abbr, task, params, out_len, evaluator, answer_turn=True, template=template))
    return out


def atc_datasets(
    langs: Sequence[str] = LANGS,
    needle_counts: Sequence[int] = tuple(2**i for i in range(1, 10)),
    question_types: Sequence[str] | None = None,
    repeats: int = 10,
    few_shot: bool = True,
    seed: int = 0,
    max_out_len: int | None = None,
    strip_think: bool | None = None,
    protocol: str = "reference",
    profile: str = "v2",
    truncated: str | None = None,
    reasoning_apart: str | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """The Ancestral Trace Challenge: one dataset per language, every needle count inside.

    ``profile="v1"`` gives the 2024 paper's multiple-choice ATC instead (``atc_mc_datasets``).

    Args:
        langs: any of ``en``, ``zh``.
        needle_counts: chain lengths N (default 2, 4, ..., 512).
        question_types: default all four.
        repeats: samples per (N, question type).
        few_shot: our worked examples (clarified prompt style only; OpenCompass's prompts carry their own).
        seed: every random choice derives from it and the sample's coordinates.
        max_out_len: an output budget for these datasets; default: the model's.
        strip_think: drop ``<think>`` blocks before grading; None (default): only under clarified scoring
            (OpenCompass's evaluators read the whole output).
        protocol: ``reference`` or ``clarified``.
        profile: ``v2`` (this task) or ``v1`` (the multiple-choice ATC; langs, repeats, seed, max_out_len,
            truncated, protocol and the options it knows, ``corpus`` and ``chain_draw``, carry over).
        truncated: ``"scored"`` or ``"unscored"`` for an output cut off at its budget (see
            ``needlebench_datasets``); default: by the protocol.
        reasoning_apart: what is scored of an answer whose reasoning the server returned apart
            (``reasoning_content``): ``"answer"`` alone (default), or ``"joined"``, OpenCompass's text
            (reasoning, ``</think>``, answer), for parity checks (docs/protocol/differences.md).
        **options: named protocol options (``prompt_style``, ``answer_match``).

    Raises:
        ConfigError: an unknown profile or language.
    """
    from ..tasks.kinship import QUESTION_TYPES

    if get_profile(profile).atc == "atc_mc":
        return atc_mc_datasets(
            langs=langs,
            repeats=repeats,
            seed=seed,
            max_out_len=max_out_len,
            truncated=truncated,
            reasoning_apart=reasoning_apart,
            protocol=protocol,
            **options,
        )
    qtypes = list(question_types or QUESTION_TYPES)
    out = []
    for lang in langs:
        if lang not in LANGS:
            raise ConfigError(f"langs: unknown language {lang!r}; choose from {LANGS}")
        params = dict(
            lang=lang,
            needle_counts=list(needle_counts),
            question_types=qtypes,
            repeats=repeats,
            few_shot=few_shot,
            seed=seed,
            protocol=protocol,
            **options,
        )
        evaluator = _scoring(strip_think=strip_think, truncated=truncated, reasoning_apart=reasoning_apart)
        out.append(task_dataset(f"needlebench_atc_{lang}", "atc", params, max_out_len, evaluator))
    return out


def atc_mc_datasets(
    langs: Sequence[str] = LANGS,
    styles: Sequence[str] = ("direct", "reasoning"),
    steps: Sequence[int] | None = None,
    repeats: int = 10,
    seed: int = 0,
    max_out_len: int | None = None,
    truncated: str | None = None,
    protocol: str = "reference",
    corpus: str = "packaged",
    reasoning_apart: str | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """The 2024 paper's ATC: multiple choice, 4-shot, circular evaluation; one dataset per (language, style).

    The worked examples are chat turns of the prompt template (as OpenCompass's v1 config has them),
    so each (language, style) is its own dataset. The task score is computed from the per-sample
    results with circular evaluation (``needlebench.tasks.atc.choice_results.circular_scores``), in the report's
    ``needlebench_atc_v1`` table.

    Args:
        langs: any of ``en``, ``zh``.
        styles: ``direct`` and/or ``reasoning`` (the 2024 paper's two prompt styles).
        steps: people in the chain (default 2..19, OpenCompass v1's).
        repeats: questions per step count.
        seed: every random choice derives from it and the question's coordinates (``chain_draw="seeded"``).
        max_out_len: an output budget; default: the model's.
        truncated: ``"scored"`` or ``"unscored"`` for an output cut off at its budget; default: scored.
        protocol: ``reference`` (OpenCompass v1's draws from ``names.json``) or ``clarified`` (ours).
        corpus: ``opencompass`` (or ``auto``) reads OpenCompass's ``names.json`` from the data folder.
        reasoning_apart: what is scored of an answer whose reasoning the server returned apart
            (``reasoning_content``): ``"answer"`` alone (default), or ``"joined"``, OpenCompass's text
            (reasoning, ``</think>``, answer), for parity checks (docs/protocol/differences.md).
        **options: named protocol options (``chain_draw``).
    """
    from ..tasks.atc.choice import oc_template_rounds

    out = []
    for lang in langs:
        if lang not in LANGS:
            raise ConfigError(f"langs: unknown language {lang!r}; choose from {LANGS}")
        for style in styles:
            params: dict[str, Any] = dict(
                lang=lang, style=style, repeats=repeats, seed=seed, protocol=protocol, corpus=corpus, **options
            )
            if steps:
                params["steps"] = list(steps)
            cfg = task_dataset(
                f"needlebench_atc_v1_{lang}_{style}",
                "atc_mc",
                params,
                max_out_len,
                _scoring(truncated=truncated, reasoning_apart=reasoning_apart),
            )
            cfg["infer_cfg"]["prompt_template"]["template"] = {"round": oc_template_rounds(lang, style)}
            out.append(cfg)
    return out


def needlechain_datasets(
    quick: bool = False,
    k_values: Sequence[int] | None = None,
    points: int | None = None,
    variants: Sequence[str] = ("forward", "backward", "mixed", "stack"),
    questions: Sequence[str] = ("single", "total"),
    seed: int = 0,
    max_out_len: int | None = None,
    strip_think: bool | None = None,
    protocol: str = "reference",
    truncated: str | None = None,
    reasoning_apart: str | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """NeedleChain: one dataset holding every (k, variant, question); quick = k 5/10/20, 10 points.

    Args:
        quick: k 5/10/20 with 10 data points (a smoke run).
        k_values: chain lengths (default 5, 10, 20, 50, 100, 200).
        points: data points per k (default 200, the paper's).
        variants: any of forward, backward, mixed, stack.
        questions: single and/or total.
        seed: every random choice derives from it and the data point's coordinates.
        max_out_len: an output budget; default: the model's.
        strip_think: drop ``<think>`` blocks before grading; None (default): only under clarified scoring
            (OpenCompass's evaluators read the whole output).
        protocol: ``reference`` (the paper's prompt, roster, names and values) or ``clarified``.
        truncated: ``"scored"`` or ``"unscored"`` for an output cut off at its budget (see
            ``needlebench_datasets``); default: by the protocol.
        reasoning_apart: what is scored of an answer whose reasoning the server returned apart
            (``reasoning_content``): ``"answer"`` alone (default), or ``"joined"``, OpenCompass's text
            (reasoning, ``</think>``, answer), for parity checks (docs/protocol/differences.md).
        **options: named protocol options (``prompt_style``, ``roster``, ``names``, ``values``, ``scoring``;
            ``scoring="released"`` scores the released way under the clarified protocol too).

    Sampling: the paper sampled at temperature 0.6, top-p 0.95; apply it to the models with
    ``needlebench.opencompass.models.with_sampling``.
    """
    ks = list(k_values or ((5, 10, 20) if quick else (5, 10, 20, 50, 100, 200)))
    params = dict(
        k_values=ks,
        points=points or (10 if quick else 200),
        variants=list(variants),
        questions=list(questions),
        seed=seed,
        lang="en",
        protocol=protocol,
        **options,
    )
    abbr = "needlechain_quick" if quick else "needlechain"
    evaluator = _scoring(strip_think=strip_think, truncated=truncated, reasoning_apart=reasoning_apart)
    return [task_dataset(abbr, "needlechain", params, max_out_len, evaluator, system=True)]


def runtime(
    num_shards: int = 1,
    max_workers: int = 1,
    eval_workers: int = 4,
    overlength: str = "shorten",
    runner: str = "LocalRunner",
    template_margin: int = 64,
    measure_with_model_tokenizer: bool = True,
    prompts: str = "text",
    beyond_window: str = "stop",
    adaptive: dict[str, Any] | None = None,
    **runner_options: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``infer`` and ``eval`` sections: token-aware shards, per-model over-length handling.

    Args:
        num_shards: inference tasks to cut (e.g. one per GPU, or per Slurm job), of about equal prompt tokens.
        max_workers: inference tasks run at once.
        eval_workers: evaluation tasks run at once; the run's datasets, every model's, are grouped into this
            many eval tasks (one OpenCompass import, or one Slurm job, per group instead of per dataset).
        overlength: ``shorten`` (cut the haystack of prompts over the model's room) or ``skip``.
        runner: an OpenCompass runner (``LocalRunner``, ``SlurmRunner``, ``DLCRunner``, ``VOLCRunner``).
        template_margin: tokens kept free for the chat template in each model's room.
        measure_with_model_tokenizer: scale each room by the model tokenizer's tokens per cl100k token.
        prompts: what prediction files keep of each prompt: ``"text"`` (OpenCompass's ``origin_prompt``,
            read by its own tools) or ``"digest"`` (its digest and sample id: a 1000k run's predictions shrink
            from the prompts' size to kilobytes per sample; the text stays in the dataset cache).
        beyond_window: cells whose prompts go past a model's context window (its ``config.json``'s
            ``max_position_embeddings``, RoPE scaling and sliding window, read offline): ``"stop"`` the run before
            any model call, naming them, or ``"mark"`` them "beyond window" in the tables and run them.
        adaptive: an adaptive run: each S-RT, M-RT and M-RS dataset is asked in rounds, only the prompts that
            decide its effective length (the adaptive length ladder's ``delta``, ``first``, ``growth``,
            ``budget``, ``seed``, ``extend``, ``graded``; ``{}`` for every default); ``needlebench run`` runs every
            round, ``opencompass`` one round per command. None: the full grid.
        **runner_options: that runner's own settings (e.g. ``partition`` for Slurm), checked against the
            parameters it names, so a typo fails when the config is read (``LocalRunner`` would ignore it).

    Raises:
        ConfigError: a bad setting, an unknown runner, or an option neither runtime nor the runner takes,
            naming the nearest valid one.
    """
    settings = RunSettings(  # the run's settings, checked once; both stages' partitioners hold them
        num_shards=num_shards,
        overlength=overlength,
        template_margin=template_margin,
        measure_with_model_tokenizer=measure_with_model_tokenizer,
        eval_tasks=eval_workers,
        prompts=prompts,
        beyond_window=beyond_window,
        adaptive=None if adaptive is None else dict(adaptive),
    )
    _check_runner_options(runner, runner_options)
    infer = dict(
        partitioner=settings.section(PARTITIONER, "infer"),
        runner=dict(type=runner, max_num_workers=max_workers, task=dict(type=INFER_TASK), **runner_options),
    )
    evaluation = dict(
        partitioner=settings.section(PARTITIONER, "eval"),
        runner=dict(type=runner, max_num_workers=eval_workers, task=dict(type=EVAL_TASK), **runner_options),
    )
    return infer, evaluation


def _check_runner_options(runner: str, options: dict[str, Any]) -> None:
    """Refuse a runner option the runner does not read, naming the nearest of runtime's and the runner's.

    A runner's ``**kwargs`` read nothing: OpenCompass 0.5.4's ``LocalRunner`` (the only runner that takes them)
    logs each as "Ignored argument" and runs on, so ``runtime(num_shard=8)`` would run one shard.
    """
    import inspect

    from .signatures import class_names, class_params

    params = class_params("opencompass.runners", runner.rsplit(".", 1)[-1])
    if params is None:
        known = [n for n in class_names("opencompass.runners", "Runner") if n != "BaseRunner"]
        raise ConfigError(f"runner: unknown runner {runner!r}; choose from {known}")
    # runtime sets task and max_num_workers itself (from max_workers and eval_workers)
    valid = params.named - {"task", "max_num_workers"}
    if not valid.issuperset(options):
        own = inspect.signature(runtime).parameters
        raise unknown_option_error("runtime", set(options) - valid, valid | (set(own) - {"runner_options"}))


def summarizer_options() -> frozenset[str]:
    """The options ``summarizer=dict(type=SUMMARIZER, ...)`` takes: ours and OpenCompass's ``DefaultSummarizer``'s
    (read from their source: checking a config imports neither)."""
    from .signatures import class_params

    ours = class_params("needlebench.opencompass", SUMMARIZER.rsplit(".", 1)[-1])
    theirs = class_params("opencompass.summarizers", "DefaultSummarizer")
    assert ours is not None and theirs is not None, "a summarizer class is not where it was"
    return (ours.named | theirs.named) - {"config"}


def check_summarizer(summarizer: Mapping[str, Any] | None) -> None:
    """Refuse an option ``summarizer=dict(type=SUMMARIZER, ...)`` does not take, when the config is read.

    The partitioner and ``needlebench plan`` call it before any model loads, so a typo (``efective_length``)
    stops the run in one line naming the nearest valid option, not after the inference. Another summarizer type
    is not checked.

    Args:
        summarizer: the config's ``summarizer`` (None: none).

    Raises:
        ConfigError: an unknown option, or an ``all_metrics`` that is not a boolean.
    """
    if not summarizer:
        return
    kind = summarizer.get("type")
    if isinstance(kind, type):
        kind = f"{kind.__module__}.{kind.__qualname__}"
    if kind != SUMMARIZER:
        return
    options = {k: v for k, v in summarizer.items() if k != "type"}
    valid = summarizer_options()
    if not valid.issuperset(options):
        raise unknown_option_error("summarizer", set(options) - valid, valid)
    if not isinstance(options.get("all_metrics", False), bool):
        raise ConfigError(f"summarizer all_metrics: {options['all_metrics']!r}; choose from (True, False)")


def load_config(config_path: str) -> tuple[Any, list[Any]]:
    """An OpenCompass config read as ``opencompass`` reads it, and its needlebench datasets.

    Args:
        config_path: the config file (its models come from ``$NEEDLEBENCH_MODELS`` where it uses ``load_models``).

    Returns:
        (the mmengine ``Config``, its needlebench dataset configs in config order).

    Raises:
        ConfigError: the file is missing, fails to load, or holds no needlebench dataset.
    """
    from mmengine.config import Config

    if not Path(config_path).is_file():
        raise ConfigError(f"config: {config_path} does not exist")
    try:
        cfg = Config.fromfile(config_path)
    except ConfigError:
        raise
    except Exception as exc:
        raise _load_error(config_path, exc) from exc
    datasets = cfg.get("datasets", [])
    ours = [d for d in datasets if is_needlebench(d)]
    if not ours:
        raise ConfigError(f"config: {config_path} has no needlebench datasets")
    return cfg, ours


LAZY_HINT = (
    "mmengine parsed it lazily because it has no `_base_ = []` line, so every call in it (such as "
    "needlebench_datasets(...)) fails, and `opencompass` stops with a bare RuntimeError(); add `_base_ = []` "
    "near the top, as the shipped configs do"
)


def _load_error(config_path: str, exc: Exception) -> ConfigError:
    """One message naming why a config failed to load, when mmengine's own says nothing useful.

    mmengine parses a config that imports non-builtin modules and has no ``_base_`` lazily: imported
    functions become placeholders whose call raises an empty ``RuntimeError``. Loading the file again
    eagerly (mmengine's public ``lazy_import=False``) shows what it would do: if that succeeds, or fails
    with our ``ConfigError``, the first failure was the lazy parse, and the message says so (with the
    ``ConfigError`` underneath, if any).

    Args:
        config_path: the config file.
        exc: what the ordinary load raised.
    """
    from mmengine.config import Config

    try:
        Config.fromfile(config_path, lazy_import=False)
    except ConfigError as eager:
        return ConfigError(f"config: {config_path}: {eager}; and {LAZY_HINT}")
    except Exception as eager:  # broken either way: say whichever error has words
        return ConfigError(f"config: cannot load {config_path}: {str(exc) or repr(eager)}")
    return ConfigError(f"config: {config_path}: {LAZY_HINT}")
