"""Config builders: one small function per suite family returns dataset dicts.

Users change lengths, depths, repeats, languages or prompt options in one
call; nothing here mutates imported objects, so configs behave the same
under ``Config.fromfile`` and plain import. Types are dotted strings: our
configs run in mmengine's plain-Python mode (so they may call these
functions), where OpenCompass can dump strings but not class objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from ..sparse import LANGS
from ..suites import get_suite, suite_buffer

__all__ = [
    "needlebench_datasets",
    "atc_datasets",
    "needlechain_datasets",
    "task_dataset",
    "SPARSE_TASKS",
    "NEEDLECHAIN_SAMPLING",
]

# The NeedleChain paper sampled open models at temperature 0.6, top-p 0.95.
NEEDLECHAIN_SAMPLING = dict(do_sample=True, temperature=0.6, top_p=0.95)

SPARSE_TASKS = ("srt", "mrt", "mrs")
PROMPT_TEMPLATE = "opencompass.openicl.icl_prompt_template.PromptTemplate"
ZERO_RETRIEVER = "opencompass.openicl.icl_retriever.ZeroRetriever"
GEN_INFERENCER = "opencompass.openicl.icl_inferencer.GenInferencer"
DATASET = "needlebench.opencompass.dataset.NeedleBenchDataset"
PARTITIONER = "needlebench.opencompass.partitioner.NeedleBenchPartitioner"
SUMMARIZER = "needlebench.opencompass.summarizer.NeedleBenchSummarizer"
EVALUATOR = "needlebench.opencompass.evaluator.NeedleBenchEvaluator"
_REPEATS = {"srt": 10, "mrt": 25, "mrs": 10}
_MAX_OUT = {"srt": 256, "mrt": 512, "mrs": 1024}


def _infer_cfg(max_out_len: int, system: bool = False) -> dict[str, Any]:
    template: dict[str, Any] = {"round": [dict(role="HUMAN", prompt="{prompt}")]}
    if system:
        template["begin"] = [dict(role="SYSTEM", fallback_role="HUMAN", prompt="{system}")]
    return dict(
        prompt_template=dict(type=PROMPT_TEMPLATE, template=template),
        retriever=dict(type=ZERO_RETRIEVER),
        inferencer=dict(type=GEN_INFERENCER, max_out_len=max_out_len),
    )


def length_buffers(lengths: Sequence[int], buffer: int) -> dict[int, int]:
    """Cap a suite's buffer at a quarter of each length.

    OpenCompass gives English 1k prompts a 3000-token buffer, leaving no
    haystack at all; a buffer exists for tokenizer slack, which scales with length.
    """
    return {int(L): min(buffer, int(L) // 4) for L in lengths}


def task_dataset(
    abbr: str,
    task: str,
    params: dict[str, Any],
    max_out_len: int,
    evaluator: dict[str, Any] | None = None,
    system: bool = False,
) -> dict[str, Any]:
    """One OpenCompass dataset entry for a needlebench task."""
    columns = ["prompt", "system"] if system else ["prompt"]
    return dict(
        abbr=abbr,
        type=DATASET,
        task=task,
        **params,
        reader_cfg=dict(input_columns=columns, output_column="answer"),
        infer_cfg=_infer_cfg(max_out_len, system),
        eval_cfg=dict(evaluator=dict(type=EVALUATOR, **(evaluator or {}))),
    )


def needlebench_datasets(
    suite: str = "128k",
    tasks: Sequence[str] = SPARSE_TASKS,
    langs: Sequence[str] = LANGS,
    lengths: Sequence[int] | None = None,
    depths: Sequence[float] | None = None,
    repeats: int | dict[str, int] | None = None,
    profile: str = "v2",
    seed: int = 0,
    corpus: str = "packaged",
    question_position: str = "end",
    recall_step: bool = False,
    metric: str | None = None,
    max_out_len: int | dict[str, int] | None = None,
    **task_options: Any,
) -> list[dict[str, Any]]:
    """The sparse-task datasets of a suite: one per (task, language).

    ``metric`` defaults to keyword EM for profile v2 and Levenshtein for v1.
    ``task_options`` pass through to every task (for example ``num_needles``).
    """
    spec = get_suite(suite)
    for t in tasks:
        if t not in SPARSE_TASKS:
            raise ConfigError(f"tasks: unknown sparse task {t!r}; choose from {SPARSE_TASKS}")
    for lang in langs:
        if lang not in LANGS:
            raise ConfigError(f"langs: unknown language {lang!r}; choose from {LANGS}")
    metric = metric or ("levenshtein" if profile == "v1" else "keyword")
    out = []
    for task in tasks:
        for lang in langs:
            reps = repeats.get(task, _REPEATS[task]) if isinstance(repeats, dict) else (repeats or _REPEATS[task])
            out_len = (
                max_out_len.get(task, _MAX_OUT[task])
                if isinstance(max_out_len, dict)
                else (max_out_len or _MAX_OUT[task])
            )
            params = dict(
                lang=lang,
                lengths=list(lengths or spec.lengths),
                depths=list(depths if depths is not None else spec.depths),
                repeats=reps,
                buffer=length_buffers(lengths or spec.lengths, suite_buffer(suite, task, lang, profile)),
                seed=seed,
                corpus=corpus,
                question_position=question_position,
                recall_step=recall_step,
                **task_options.get(task, {}),
            )
            evaluator = {"metric": metric} if task in ("srt", "mrt") else {}
            out.append(task_dataset(f"needlebench_{task}_{lang}_{suite}", task, params, out_len, evaluator))
    return out


def atc_datasets(
    langs: Sequence[str] = LANGS,
    needle_counts: Sequence[int] = tuple(2**i for i in range(1, 10)),
    question_types: Sequence[str] | None = None,
    repeats: int = 10,
    few_shot: bool = True,
    seed: int = 0,
    max_out_len: int = 8192,
    strip_think: bool = True,
) -> list[dict[str, Any]]:
    """The Ancestral Trace Challenge: one dataset per language, every needle count inside."""
    from ..kinship import QUESTION_TYPES

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
        )
        out.append(task_dataset(f"needlebench_atc_{lang}", "atc", params, max_out_len, {"strip_think": strip_think}))
    return out


def needlechain_datasets(
    quick: bool = False,
    k_values: Sequence[int] | None = None,
    points: int | None = None,
    variants: Sequence[str] = ("forward", "backward", "mixed", "stack"),
    questions: Sequence[str] = ("single", "total"),
    seed: int = 0,
    max_out_len: int = 4096,
    lenient: bool = False,
    strip_think: bool = True,
) -> list[dict[str, Any]]:
    """NeedleChain: one dataset holding every (k, variant, question); quick = k 5/10/20, 10 points."""
    ks = list(k_values or ((5, 10, 20) if quick else (5, 10, 20, 50, 100, 200)))
    params = dict(
        k_values=ks,
        points=points or (10 if quick else 200),
        variants=list(variants),
        questions=list(questions),
        seed=seed,
        lang="en",
    )
    abbr = "needlechain_quick" if quick else "needlechain"
    return [
        task_dataset(
            abbr, "needlechain", params, max_out_len, {"lenient": lenient, "strip_think": strip_think}, system=True
        )
    ]


def runtime(
    num_shards: int = 1,
    max_workers: int = 1,
    eval_workers: int = 4,
    overlength: str = "shorten",
    runner: str = "LocalRunner",
    **runner_options: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``infer`` and ``eval`` sections: token-aware shards, per-model over-length handling.

    ``num_shards`` is how many inference tasks to cut (e.g. one per GPU, or per Slurm job);
    ``runner="SlurmRunner"`` with ``partition=...`` passes straight through to OpenCompass.
    """
    infer = dict(
        partitioner=dict(type=PARTITIONER, num_shards=num_shards, stage="infer", overlength=overlength),
        runner=dict(type=runner, max_num_workers=max_workers, task=dict(type="OpenICLInferTask"), **runner_options),
    )
    evaluation = dict(
        partitioner=dict(type=PARTITIONER, stage="eval", overlength=overlength),
        runner=dict(type=runner, max_num_workers=eval_workers, task=dict(type="OpenICLEvalTask"), **runner_options),
    )
    return infer, evaluation
