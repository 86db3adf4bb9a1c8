"""Our suite tables against OpenCompass 0.5.4's own config files, so the two cannot drift apart.

Every suite a config builder makes (``needlebench_datasets(suite, profile=...)``, ``atc_datasets``) is
compared with the dataset entries of the config modules OpenCompass installs (plain Python, imported
here): ``configs/datasets/needlebench_v2/`` for ``profile="v2"`` and ``configs/datasets/needlebench/`` for
``profile="v1"``. Per suite, task and language: the lengths, the depths (M-RT: its depth list), the
buffer, the repeats, the M-RS needle counts and spacing, the guide sentence (v1) and the question position;
for ATC the needle counts and repeats (v2) and the multiple-choice steps, repeats, shots, styles and
circular evaluation (v1). The last test is the evidence for a listed measurement fix: OpenCompass's
NeedleBench summarizer fills its S-RT group with the M-RT datasets.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from typing import Any

import pytest

pytest.importorskip("opencompass")

from needlebench.opencompass.configs import atc_datasets, needlebench_datasets  # noqa: E402
from needlebench.tasks.profiles import SUITES  # noqa: E402
from needlebench.tasks.sparse.mrs import MRS_COUNTS, REFERENCE_DIFF  # noqa: E402

LANGUAGE = {"English": "en", "Chinese": "zh"}
KINDS = {"srt": "single", "mrt": "multi_retrieval", "mrs": "multi_reasoning"}
MODULES = {
    "v2": "opencompass.configs.datasets.needlebench_v2.needlebench_v2_{suite}.needlebench_v2_{kind}_{suite}",
    "v1": "opencompass.configs.datasets.needlebench.needlebench_{suite}.needlebench_{kind}_{suite}",
}


def _entries(module: str) -> list[dict[str, Any]]:
    """Every dataset entry a config module defines (its ``*_datasets`` lists)."""
    mod = importlib.import_module(module)
    out = [d for name, value in vars(mod).items() if name.endswith("_datasets") for d in value]
    assert out, f"{module} defines no datasets"
    return out


def _one(values: set, what: str) -> Any:
    """The single value a whole OpenCompass dataset group shares (the test fails if it varies)."""
    assert len(values) == 1, f"{what} varies inside one OpenCompass config: {sorted(values, key=str)}"
    return next(iter(values))


def _oc_table(profile: str, suite: str, task: str) -> dict[str, dict[str, Any]]:
    """OpenCompass's table of one (suite, task) per language, from its config module (or modules: rawprompt too)."""
    modules = [MODULES[profile].format(suite=suite, kind=KINDS[task])]
    if profile == "v1":
        modules.append(modules[0] + "_rawprompt")  # v1 ships each config twice; the tables must agree
    groups: dict[str, list[dict]] = defaultdict(list)
    for module in modules:
        for d in _entries(module):
            groups[LANGUAGE[d["language"]]].append(d)
    table = {}
    for lang, ds in groups.items():
        row: dict[str, Any] = {
            "lengths": sorted({d["length"] for d in ds}),
            "buffer": _one({d["length_buffer"] for d in ds}, "length_buffer"),
            "repeats": _one({d["num_repeats_per_file"] for d in ds}, "num_repeats_per_file"),
            "position": _one({d.get("position", d.get("quesiton_position", "End")) for d in ds}, "position"),
            "guide": _one({d.get("guide", False) for d in ds}, "guide"),
        }
        if task == "mrt":
            row["depths"] = list(_one({tuple(d["depths"]) for d in ds}, "depths"))
        else:
            row["depths"] = sorted({d["depth"] for d in ds})
        if task == "mrs":
            row["num_needles"] = sorted({d["num_needles"] for d in ds})
            row["diff"] = _one({d["diff"] for d in ds}, "diff")
            cells = {(d["length"], d["depth"], d["num_needles"]) for d in ds}
            assert len(cells) == len(row["lengths"]) * len(row["depths"]) * len(row["num_needles"])  # a full grid
        elif task == "srt":
            assert len({(d["length"], d["depth"]) for d in ds}) == len(row["lengths"]) * len(row["depths"])
        table[lang] = row
    return table


def _our_table(profile: str, suite: str, task: str) -> dict[str, dict[str, Any]]:
    """Ours: the parameters ``needlebench_datasets`` gives each dataset of the suite."""
    table = {}
    for d in needlebench_datasets(suite, tasks=[task], profile=profile):
        row: dict[str, Any] = {
            "lengths": list(d["lengths"]),
            "buffer": d["buffer"],
            "repeats": d["repeats"],
            "position": d["question_position"].capitalize(),
            "guide": d["recall_step"],
            "depths": list(d["depths"]),
        }
        if task == "mrs":
            row["num_needles"] = sorted(d.get("num_needles") or MRS_COUNTS)
            row["diff"] = REFERENCE_DIFF
        table[d["lang"]] = row
    return table


@pytest.mark.parametrize("profile", ["v2", "v1"])
@pytest.mark.parametrize("suite", list(SUITES))
@pytest.mark.parametrize("task", list(KINDS))
def test_sparse_suite_tables_equal_opencompass_configs(profile: str, suite: str, task: str) -> None:
    oc, ours = _oc_table(profile, suite, task), _our_table(profile, suite, task)
    assert set(oc) == set(ours) == {"en", "zh"}
    for lang in oc:
        assert ours[lang] == oc[lang], f"{profile} {suite} {task} {lang}: ours {ours[lang]} != OpenCompass {oc[lang]}"
        assert all(isinstance(d, int) for d in ours[lang]["depths"])  # OpenCompass's int() depths, not 5.263


def test_atc_tables_equal_opencompass_configs() -> None:
    """v2: ``atc_0shot_nocot_2_power_en`` (needle counts, repeats); v1: ``atc_choice_20`` (the 2024 paper's)."""
    from needlebench.tasks.atc.choice import DEFAULT_STEPS, STYLES, AtcMcParams
    from needlebench.tasks.atc.open_answer import DEFAULT_COUNTS

    v2 = _entries("opencompass.configs.datasets.needlebench_v2.atc.atc_0shot_nocot_2_power_en")
    ours_v2 = atc_datasets()
    assert {d.get("needle_counts", list(DEFAULT_COUNTS)) and tuple(d["needle_counts"]) for d in ours_v2} == {
        tuple(d["num_needles"] for d in v2)
    }
    assert {d["repeats"] for d in ours_v2} == {_one({d["repeats"] for d in v2}, "repeats")}

    module = importlib.import_module("opencompass.configs.datasets.needlebench.atc.atc_choice_20")
    v1 = _entries(module.__name__)
    ours_v1 = atc_datasets(profile="v1")
    defaults = AtcMcParams(lang="en")
    oc_steps = sorted({d["num_needles"] for d in v1})
    assert list(defaults.steps) == list(DEFAULT_STEPS) == oc_steps == list(module.needle_num_list)
    assert {d["repeats"] for d in ours_v1} == {_one({d["repeats"] for d in v1}, "repeats")}
    assert defaults.shots == module.few_shot_samples and module.with_few_shot
    assert _one({d["with_circular"] for d in v1}, "with_circular") and module.with_circular_eval
    # one dataset per (language, style) here, one per (language, style, steps) there: the same four groups
    oc_groups = {(LANGUAGE[d["language"]], "reasoning" if d["abbr"].endswith("-Reasoning") else "direct") for d in v1}
    assert {(d["lang"], d["style"]) for d in ours_v1} == oc_groups == {(lg, s) for lg in ("en", "zh") for s in STYLES}
    assert len(v1) == len(oc_groups) * len(oc_steps)


def test_opencompass_summarizer_fills_srt_with_mrt_datasets() -> None:
    """The evidence for a listed fix: OpenCompass's NeedleBench summarizer scores S-RT with M-RT's datasets.

    ``configs/summarizers/needlebench.py`` builds the ``Single-Needle-Retrieval(S-RT)`` group of every suite
    (v1 and v2 alike) from ``Length{L}_parallel_{lang}_{suite}``, the M-RT datasets (once per depth), and no
    S-RT dataset (``..._origin_...``) is in any group. Its v1 overall (weights 0.4 / 0.3 / 0.3) is therefore
    0.7 x M-RT + 0.3 x M-RS, S-RT not in it. Ours weights each task's own datasets
    (``tests/test_aggregates.py``: ``OVERALL (v1)`` = 0.4 S-RT + 0.3 M-RT + 0.3 M-RS).
    """
    summarizers = importlib.import_module("opencompass.configs.summarizers.needlebench")
    for name in ("needlebench_4k_summarizer", "needlebench_128k_summarizer", "needlebench_v2_128k_summarizer"):
        suite = name.split("_")[-2].upper()
        groups = {g["name"]: g for g in getattr(summarizers, name)["summary_groups"]}
        srt = groups[f"Single-Needle-Retrieval(S-RT)-{suite}"]["subsets"]
        assert srt and all("_parallel_" in subset[0] for subset in srt), srt[:3]  # every S-RT subset is M-RT's
        members = [s if isinstance(s, str) else s[0] for g in groups.values() for s in g["subsets"]]
        assert not any("_origin_" in m for m in members)  # no S-RT dataset in any group
        overall = groups[f"NeedleBench-Overall-Score-{suite}"]
        weights = overall["weights"]
        if not name.startswith("needlebench_v2"):
            assert weights[f"Single-Needle-Retrieval(S-RT)-{suite}"] == 0.4  # 0.4 of the overall is M-RT's score
    from needlebench.report.tables import suite_weights

    assert suite_weights("v1") == {"srt": 0.4, "mrt": 0.3, "mrs": 0.3}  # each task's own datasets, weighted
