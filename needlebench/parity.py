"""Parity a user checks on their own machine: OpenCompass's installed loaders and evaluators against ours.

``needlebench parity`` (``commands/parity.py``) reads OpenCompass's own suite configs (v2 or v1, its
``PromptTemplate`` configs or its ``*_rawprompt.py`` ones), builds a sample of their cells with OpenCompass's
installed loaders from the user's data folder and the same cells with our generators from the same files,
and compares the prompts byte for byte. A difference is attributed to a listed fix only when OpenCompass's
own output, with that fix applied to it here, is our prompt (the rebuild reads OpenCompass's token list, not
our generator): ``seeded`` (M-RT's draw), ``split``, ``buffer_shrink``, ``wrap``, ``start_tuple``; anything
else is ``UNATTRIBUTED`` (``tasks/sparse/alignment.py``). Each built sample is then answered three ways (our
oracle's answer, an empty one, a wrong one) and scored by the evaluator and post-processors OpenCompass's config names and by
ours under the reference protocol. The report records OpenCompass's version and a digest of its NeedleBench
modules, of every config file read and of every data file, so a result is tied to what it was run on.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import re
import shutil
import statistics
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .context.tokenizer import get_encoding
from .errors import ConfigError
from .report.parity_link import file_digest
from .scoring import ScoreOptions
from .tasks import get_task
from .tasks.profiles import get_profile
from .tasks.sparse.alignment import (
    CONFIG_FILES,
    LOADER_FILES,
    UNATTRIBUTED,
    Explainer,
    describe_cell,
    opencompass_answer,
    ours_for_cells,
    row_key,
    sample_cells,
)

__all__ = [
    "ParityCell",
    "ParityReport",
    "REFERENCE_VERSION",
    "TokenRecorder",
    "check_parity",
    "oc_modules_digest",
]

REFERENCE_VERSION = "0.5.4"  # the OpenCompass this check, and our reference protocol, were built against
LANGUAGE = {"English": "en", "Chinese": "zh"}
CORPUS_FILES = ("PaulGrahamEssays.jsonl", "zh_finance.jsonl")
RENDERS = ("prompt", "raw")
_LONG = 100_000  # a cell this long is built with one repeat (OpenCompass's loader takes seconds there)


@dataclass(frozen=True)
class ParityCell:
    """One compared prompt: where it is, what explains a difference, and how its scores compared.

    Args:
        task: ``srt``, ``mrt`` or ``mrs``.
        lang: ``en`` or ``zh``.
        cell: its coordinates in OpenCompass's config (length, depth, needles, repeat, position).
        tag: ``identical`` (``seeded`` for M-RT), the listed fixes joined by ``+``, or ``UNATTRIBUTED``.
        gold_equal: our gold, in OpenCompass's answer form, equals its answer column.
        scores: (output kind, OpenCompass's score, ours) per generated output.
        moves: under ``split``, how many tokens each needle moved from where OpenCompass put it.
    """

    task: str
    lang: str
    cell: str
    tag: str
    gold_equal: bool
    scores: tuple[tuple[str, float, float], ...] = ()
    moves: tuple[int, ...] = ()

    @property
    def agrees(self) -> bool:
        """Every output got the same score from OpenCompass's evaluator and ours."""
        return all(abs(theirs - ours) < 1e-9 for _, theirs, ours in self.scores)


@dataclass
class ParityReport:
    """A parity check's outcome and what it was run on.

    Args:
        profile: ``v2`` or ``v1``.
        suite: the suite checked.
        render: ``prompt`` or ``raw`` (which of OpenCompass's config files were read).
        opencompass_version: the installed OpenCompass's version.
        modules_digest: a digest of its NeedleBench loader and evaluator modules.
        config_files: each config file read -> its digest.
        data_files: each data file -> its digest.
        cells: every compared prompt.
        notes: what differs from the OpenCompass this check was built against, if anything.
    """

    profile: str
    suite: str
    render: str
    opencompass_version: str
    modules_digest: str
    config_files: dict[str, str] = field(default_factory=dict)
    data_files: dict[str, str] = field(default_factory=dict)
    cells: list[ParityCell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def unattributed(self) -> list[ParityCell]:
        """The prompts (or golds) no listed fix explains."""
        return [c for c in self.cells if c.tag == UNATTRIBUTED or not c.gold_equal]

    @property
    def disagreements(self) -> list[ParityCell]:
        """The prompts whose outputs OpenCompass's evaluator and ours scored differently."""
        return [c for c in self.cells if not c.agrees]

    @property
    def passed(self) -> bool:
        """No unattributed byte, no score disagreement, and at least one prompt compared."""
        return bool(self.cells) and not self.unattributed and not self.disagreements

    def shares(self) -> dict[str, dict[str, Any]]:
        """Per task: prompts compared, byte-identical ones and their share, and the count per attribution."""
        out: dict[str, dict[str, Any]] = {}
        for task in CONFIG_FILES:
            mine = [c for c in self.cells if c.task == task]
            if not mine:
                continue
            same = sum(c.tag in ("identical", "seeded") for c in mine)
            split = [c for c in mine if "split" in c.tag.split("+")]
            moves = sorted(m for c in split for m in c.moves if m)
            out[task] = {
                "prompts": len(mine),
                "identical": same,
                "identical_share": round(100 * same / len(mine), 1),
                "attributions": dict(sorted(Counter(c.tag for c in mine).items())),
                "split": len(split),
                "split_share": round(100 * len(split) / len(mine), 1),
                "moved_needles": len(moves),
                "move_tokens_max": moves[-1] if moves else 0,
                "move_tokens_median": statistics.median(moves) if moves else 0,
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        """The report as ``parity.json`` stores it."""
        scored = [s for c in self.cells for s in c.scores]
        return {
            "passed": self.passed,
            "profile": self.profile,
            "suite": self.suite,
            "render": self.render,
            "opencompass_version": self.opencompass_version,
            "reference_version": REFERENCE_VERSION,
            "modules_digest": self.modules_digest,
            "config_files": self.config_files,
            "data_files": self.data_files,
            "tasks": self.shares(),
            "scores": {"outputs": len(scored), "agree": sum(abs(t - o) < 1e-9 for _, t, o in scored)},
            "unattributed": [c.__dict__ for c in self.unattributed],
            "disagreements": [c.__dict__ for c in self.disagreements],
            "notes": self.notes,
        }

    def markdown(self) -> str:
        """The report as ``parity.md`` and the terminal show it."""
        data = self.to_dict()
        lines = [
            f"# Parity with OpenCompass {self.opencompass_version}: {self.profile} {self.suite}, render {self.render}",
            "",
            f"**{'PASSED' if self.passed else 'FAILED'}**: {len(self.cells)} prompts built by OpenCompass's loaders "
            f"and ours from the same files; {len(self.unattributed)} unattributed; outputs scored "
            f"{data['scores']['agree']} of {data['scores']['outputs']} alike.",
            "",
            "| task | prompts | byte-identical | share | attributions | needles moved by `split` (max / median tokens) |",
            "|---|---|---|---|---|---|",
        ]
        for task, row in data["tasks"].items():
            tags = ", ".join(f"{k} {v}" for k, v in row["attributions"].items())
            moved = f"{row['moved_needles']} ({row['move_tokens_max']} / {row['move_tokens_median']})"
            lines.append(
                f"| {task} | {row['prompts']} | {row['identical']} | {row['identical_share']}% | {tags} | {moved} |"
            )
        lines += ["", f"OpenCompass NeedleBench modules: `{self.modules_digest}`"]
        for name, digest in {**self.config_files, **self.data_files}.items():
            lines.append(f"- `{name}`: `{digest}`")
        for c in self.unattributed:
            lines.append(f"- UNATTRIBUTED: {c.task} {c.lang} {c.cell} (tag {c.tag}, gold equal {c.gold_equal})")
        for c in self.disagreements:
            lines.append(f"- SCORES DIFFER: {c.task} {c.lang} {c.cell}: {list(c.scores)}")
        lines += [f"- note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _oc_root() -> Path:
    import opencompass

    return Path(opencompass.__file__).parent


def oc_modules_digest(profile: str) -> str:
    """A digest of the installed OpenCompass's NeedleBench loaders and evaluators for a profile.

    Args:
        profile: ``v2`` (``datasets/needlebench_v2``) or ``v1`` (``datasets/needlebench``).
    """
    folder = _oc_root() / "datasets" / ("needlebench_v2" if profile == "v2" else "needlebench")
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _config_path(profile: str, suite: str, task: str, render: str) -> Path:
    root = _oc_root() / "configs" / "datasets"
    if profile == "v2":
        name = f"needlebench_v2_{CONFIG_FILES[task]}_{suite}.py"
        return root / "needlebench_v2" / f"needlebench_v2_{suite}" / name
    raw = "_rawprompt" if render == "raw" else ""
    return root / "needlebench" / f"needlebench_{suite}" / f"needlebench_{CONFIG_FILES[task]}_{suite}{raw}.py"


def _plain(entry: dict) -> dict:
    """A config entry as its loader takes it: no abbr, no reader/infer/eval parts."""
    return {k: v for k, v in entry.items() if k != "abbr" and not k.endswith("_cfg")}


def _config_entries(path: Path) -> list[dict]:
    """The dataset entries of one OpenCompass config file, as it builds them."""
    from mmengine.config import Config

    cfg = Config.fromfile(str(path))
    return [dict(d) for key in cfg if key.endswith("_datasets") for d in cfg[key]]


class TokenRecorder:
    """tiktoken's encoding with ``decode`` recorded (the token list each prompt was decoded from);
    ``encode`` memoised, since OpenCompass encodes every document again for every cell.

    Args:
        memo: text -> its tokens, shared by the recorders of one check (``encode`` is pure).
    """

    def __init__(self, memo: dict[str, list[int]]) -> None:
        self.enc = get_encoding("cl100k_base")
        self.memo = memo
        self.decoded: list[list[int]] = []

    def encode(self, text: str) -> list[int]:
        if text not in self.memo:
            self.memo[text] = self.enc.encode(text)
        return list(self.memo[text])

    def decode(self, tokens: list[int]) -> str:
        self.decoded.append(list(tokens))
        return self.enc.decode(tokens)


@contextlib.contextmanager
def _patched(module: Any, **attrs: Any) -> Iterator[None]:
    """Module attributes replaced for the block and put back after it, whatever happens."""
    saved = {k: getattr(module, k) for k in attrs if hasattr(module, k)}
    for k, v in attrs.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k in attrs:
            if k in saved:
                setattr(module, k, saved[k])
            else:
                delattr(module, k)


class _OpenCompass:
    """OpenCompass's loaders on the user's data folder: each built row with the token list it was decoded from.

    Its unseeded draws use a private ``random.Random(seed)`` (the listed ``seeded`` fix: the global state is
    left alone), its tokenizer the offline cl100k file, its data path the folder given.
    """

    def __init__(self, profile: str, folder: Path) -> None:
        self.profile = profile
        self.folder = folder
        self.memo: dict[str, list[int]] = {}

    def run(self, cell: dict, folder: Path | None = None, rng: random.Random | None = None) -> list[tuple]:
        """(prompt, answer, decoded tokens, built as a tuple) per row of one config entry."""
        if self.profile == "v2":
            from opencompass.datasets.needlebench_v2 import multi, origin, parallel
        else:
            from opencompass.datasets.needlebench import multi, origin, parallel
        kind = cell["type"] if isinstance(cell["type"], str) else cell["type"].__name__
        module = {"NeedleBenchOriginDataset": origin, "NeedleBenchParallelDataset": parallel}.get(
            kind.rsplit(".", 1)[-1], multi
        )
        where = folder or self.folder
        recorder = TokenRecorder(self.memo)
        attrs: dict[str, Any] = dict(
            random=rng or random.Random(0),
            tiktoken=SimpleNamespace(encoding_for_model=lambda name: recorder),
            get_data_path=lambda path, *a, **k: str(where),
        )
        extra = {"hf_hub_download": lambda repo_id, filename, repo_type: str(where / filename)}
        with _patched(module, **attrs), _patched(multi, **extra) if hasattr(multi, "hf_hub_download") else _nothing():
            rows = cell["type"].load(**{k: v for k, v in cell.items() if k != "type"})
        out = []
        for row, tokens in zip(rows, recorder.decoded, strict=True):
            prompt = row["prompt"]
            tupled = not isinstance(prompt, str)  # v1's Chinese "start" prompt, stored as a list
            out.append(("".join(prompt) if tupled else prompt, row["answer"], tokens, tupled))
        return out


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


# -- scores ---------------------------------------------------------------------------------------------------


def _oc_scorer(entry: dict) -> Any:
    """The evaluator and post-processors OpenCompass's config entry names, as a function (prediction, answer)
    -> score (0..100)."""
    import io
    from contextlib import redirect_stdout

    from mmengine.registry import build_from_cfg
    from opencompass.registry import ICL_EVALUATORS, TEXT_POSTPROCESSORS

    eval_cfg = dict(entry.get("eval_cfg") or {})
    evaluator = build_from_cfg(dict(eval_cfg["evaluator"]), ICL_EVALUATORS)

    def post(key: str) -> Any:
        cfg = dict(eval_cfg.get(key) or {})
        if not cfg:
            return lambda text: text
        kind = cfg.pop("type")
        fn = TEXT_POSTPROCESSORS.get(kind) if isinstance(kind, str) else kind
        return lambda text: fn(text, **cfg)

    pred_post, answer_post = post("pred_postprocessor"), post("dataset_postprocessor")

    def score(prediction: str, answer: str) -> float:
        with redirect_stdout(io.StringIO()):  # its parallel evaluators print every prediction
            result = evaluator.score([pred_post(prediction)], [answer_post(answer)])
        details = result.get("details")
        if isinstance(details, list) and details and isinstance(details[0], dict):
            d = details[0]
            if "score" in d:
                return float(d["score"])
            if "correct" in d:
                return 100.0 if d["correct"] else 0.0
        return float(result.get("score", result.get("average_score", 0.0)))

    return score


WRONG = "The document does not say; I cannot answer \\boxed{nobody}."  # no keyword, no gold name


def _outputs(task: str, sample: Any) -> list[tuple[str, str]]:
    """The outputs each prompt is scored with: our oracle's answer, an empty one, a wrong one."""
    oracle = get_task(task).oracle
    if oracle is None:
        raise ConfigError(f"task {task!r} has no oracle to answer with")
    return [("oracle", oracle(sample.gold)), ("empty", ""), ("wrong", WRONG)]


# -- the check -------------------------------------------------------------------------------------------------


_SCRATCH_LINK = re.compile(r"(?<![\w./-])data/needlebench/")  # the data folder as the loaders reach it


@contextlib.contextmanager
def _in_data_folder(data: Path) -> Iterator[Path]:
    """A scratch folder where ``./data/needlebench`` is the user's data folder (what ``corpus="opencompass"`` and
    OpenCompass's configs read), and a copy whose corpus files hold their documents twice (``wrap``)."""
    import os

    from .context import corpora, haystack
    from .tasks import kinship
    from .tasks.sparse import needles

    caches = (corpora.load_corpus, corpora.corpus_digest, haystack.load_tokenized, needles.load_needle_bank)
    with tempfile.TemporaryDirectory(prefix="needlebench-parity-") as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        (root / "data" / "needlebench").symlink_to(data.resolve(), target_is_directory=True)
        wrapped = root / "wrapped"
        wrapped.mkdir()
        for path in data.iterdir():
            if path.is_file():
                if path.name in CORPUS_FILES:
                    text = path.read_text(encoding="utf-8")
                    (wrapped / path.name).write_text(text + text, encoding="utf-8")
                else:
                    shutil.copyfile(path, wrapped / path.name)
        before = Path.cwd()
        saved = os.environ.pop("COMPASS_DATA_CACHE", None)
        os.chdir(root)
        for c in caches:
            c.cache_clear()
        kinship.load_name_list.cache_clear()
        try:
            yield wrapped
        except ConfigError as exc:  # a loader's message names the file by the scratch link: name the user's
            raise ConfigError(_SCRATCH_LINK.sub(f"{data}/", str(exc))) from None
        finally:
            os.chdir(before)
            if saved is not None:
                os.environ["COMPASS_DATA_CACHE"] = saved
            for c in caches:
                c.cache_clear()
            kinship.load_name_list.cache_clear()


def _check_data_files(folder: Path, profile: str, tasks: Sequence[str]) -> None:
    """Every file the tasks' OpenCompass loaders open is in the data folder, before either side builds a cell.

    Why: a file missing halfway through would stop the check with OpenCompass's own traceback, naming a path
    in the scratch folder rather than the user's; an empty corpus file, or one cut inside a character, stops it
    deep in the haystack builder.

    Raises:
        ConfigError: the files missing, empty or not UTF-8, named with the folder.
    """
    needed = dict.fromkeys([*CORPUS_FILES, *(f for task in tasks for f in LOADER_FILES[(profile, task)])])
    missing = [name for name in needed if not (folder / name).is_file()]
    if missing:
        raise ConfigError(
            f"data: {folder} lacks {', '.join(missing)} (OpenCompass's NeedleBench data files the "
            f"{profile} {'/'.join(tasks)} configs read)"
        )
    for name in needed:
        body = (folder / name).read_bytes()
        if not body.strip():
            raise ConfigError(f"data: {folder / name} is empty (a download cut short?)")
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"data: {folder / name} is not UTF-8 text (byte {exc.start}; a download cut short?)"
            ) from None


def check_parity(
    data: Path | str,
    profile: str = "v1",
    suite: str = "4k",
    render: str = "prompt",
    tasks: Sequence[str] | None = None,
    every: bool = False,
    progress: Any = None,
) -> ParityReport:
    """Build a sample of a suite's cells with OpenCompass's loaders and with ours, compare and score them.

    Args:
        data: OpenCompass's NeedleBench data folder (``PaulGrahamEssays.jsonl``, ``zh_finance.jsonl``,
            ``needles.jsonl``, ``names.json``, the multi-hop records): the files its configs read.
        profile: ``v2`` (its ``needlebench_v2`` configs) or ``v1`` (its ``needlebench`` configs).
        suite: ``4k`` ... ``1000k``.
        render: ``prompt`` (its ``PromptTemplate`` configs) or ``raw`` (v1's ``*_rawprompt.py`` configs).
        tasks: any of ``srt``, ``mrt``, ``mrs``.
        every: every cell at the config's repeats, not a sample.
        progress: called with one line per compared cell group, if given.

    Raises:
        ConfigError: a missing data folder or a file of it the tasks read, an unknown profile, suite, render or
            task, or a raw render under v2 (OpenCompass ships raw-prompt configs for v1 only).
    """
    import opencompass

    folder = Path(data)
    if not folder.is_dir():
        raise ConfigError(f"data: {folder} is not a folder (OpenCompass's NeedleBench data files)")
    folder = folder.resolve()  # the check reads it from a scratch folder it changes into
    get_profile(profile).suite(suite)
    if render not in RENDERS:
        raise ConfigError(f"render: {render!r}; choose from {RENDERS}")
    if render == "raw" and profile != "v1":
        raise ConfigError("render: OpenCompass 0.5.4 ships raw-prompt configs for the v1 suites only")
    tasks = tuple(tasks or CONFIG_FILES)
    unknown = sorted(set(tasks) - set(CONFIG_FILES))
    if unknown:
        raise ConfigError(f"tasks: unknown {unknown}; choose from {list(CONFIG_FILES)}")
    _check_data_files(folder, profile, tasks)
    report = ParityReport(profile, suite, render, opencompass.__version__, oc_modules_digest(profile))
    if report.opencompass_version != REFERENCE_VERSION:
        report.notes.append(
            f"installed OpenCompass {report.opencompass_version}, not {REFERENCE_VERSION} (the version our reference "
            "protocol reproduces); a difference found here may be a change in OpenCompass"
        )
    report.data_files = {p.name: file_digest(p) for p in sorted(folder.iterdir()) if p.is_file()}
    options = get_profile(profile).scoring
    with _in_data_folder(folder) as wrapped:
        oc = _OpenCompass(profile, folder)
        for task in tasks:
            path = _config_path(profile, suite, task, render)
            report.config_files[str(path.relative_to(_oc_root()))] = file_digest(path)
            entries = _config_entries(path)
            short = (  # v2's buffer_shrink: the same cell as OpenCompass's own 4k suite builds it
                [_plain(e) for e in _config_entries(_config_path(profile, "4k", task, render))]
                if profile == "v2" and suite != "4k"
                else []
            )
            explain = Explainer(task, profile, oc.run, folder, wrapped, short)
            grade = get_task(task).grade
            metric = options.get(task, {}).get("metric", "keyword")
            for language in ("English", "Chinese"):
                cells = [{k: v for k, v in e.items() if k != "abbr"} for e in entries if e["language"] == language]
                lang = LANGUAGE[language]
                for cell in sample_cells(cells, task, every):
                    reps = cell["num_repeats_per_file"] if every else 1
                    reps = 1 if cell["length"] >= _LONG else reps
                    posed = {k: v for k, v in cell.items() if not k.endswith("_cfg")}
                    posed["num_repeats_per_file"] = reps
                    ours = ours_for_cells(profile, task, lang, [posed], reps)
                    score = _oc_scorer(cell)
                    built = oc.run(posed)
                    for repeat, row in enumerate(built):
                        mine = ours[row_key(task, posed, repeat)]
                        where = describe_cell(task, posed, repeat, profile)
                        scores = tuple(
                            (kind, score(text, row[1]), grade(text, mine.gold, ScoreOptions(metric=metric)).score)
                            for kind, text in _outputs(task, mine)
                        )
                        tag, moves = explain(posed, row, mine)
                        report.cells.append(
                            ParityCell(
                                task, lang, where, tag, opencompass_answer(profile, task, mine) == row[1], scores, moves
                            )
                        )
                    if progress is not None:
                        progress(f"{task} {lang} {describe_cell(task, posed, None, profile)}: {report.cells[-1].tag}")
    return report
