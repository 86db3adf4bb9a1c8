"""KV-cache compression as an axis: kvpress presses on the bundled SmolLM2, each press and ratio a model of one run.

The checks made before any model loads (one line each); then real OpenCompass runs: the wiring (the plain model,
SnapKV at ratio 0 built by hand, YaRN x2 swept and Finch at 0.5 swept over it: two axes, each variant's baseline
from the plan) in the default set, and the
issue's whole sweep (three presses, one of them StreamingLLM and one query-aware only, at three ratios, S-RT
and M-RT at 1k-4k in both languages) in the opt-in ``methods`` set (``bash scripts/test.sh -m methods``).

kvpress runs here on OpenCompass's numpy 1.26 (installed without its declared numpy>=2: scripts/setup.sh);
the wiring test is the one that fails when a kvpress release stops working beside OpenCompass.
"""

from __future__ import annotations

import csv
import json
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from conftest import bin_path, run_opencompass

from needlebench.errors import ConfigError
from needlebench.methods.kv_press import PressSpec, press_names
from needlebench.opencompass.models import check_model, kvpress_model, kvpress_sweep, smollm2_folder, smollm2_model
from needlebench.report.axes import expected_kept


def _base() -> dict:
    return smollm2_model()


def test_kvpress_runs_beside_opencompass_numpy() -> None:
    """The install this project makes: kvpress without its numpy>=2 pin, on the numpy OpenCompass declares, runs a
    press: SnapKV at ratio 0.5 on a prefill of 200 tokens keeps 100 entries per layer and KV head, each one of
    the entries the same prefill caches without the press (a small random Llama: no weights to load)."""
    import torch
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    from needlebench.methods.kv_press import build_press

    assert metadata.version("numpy").startswith("1."), "OpenCompass 0.5.4 declares numpy<2"
    assert {"SnapKVPress", "StreamingLLMPress", "KnormPress", "FinchPress"} <= set(press_names())
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 256, (1, 200))
    press = build_press(PressSpec("SnapKVPress", 0.5))
    full, pressed = DynamicCache(), DynamicCache()
    with torch.no_grad():
        model(ids, past_key_values=full, use_cache=True)
        with press(model):
            model(ids, past_key_values=pressed, use_cache=True)
    assert [tuple(layer.keys.shape) for layer in pressed.layers] == [(1, 2, expected_kept(200, 0.5), 16)] * 2
    for whole, kept in zip(full.layers, pressed.layers, strict=True):
        for head in range(2):
            # each kept key is a row of the uncompressed cache (the same position's key, bit for bit), none twice
            match = (kept.keys[0, head][:, None, :] == whole.keys[0, head][None, :, :]).all(-1)
            assert match.any(1).all() and len({int(i) for i in match.int().argmax(1)}) == 100


def test_bad_press_settings_are_one_line_before_any_model_loads(tmp_path: Path) -> None:
    from needlebench.opencompass.kvpress_model import KVPressModel

    folder = smollm2_folder()
    cases = [
        (lambda: kvpress_model("m", folder, 8192, press="SnapKVPresss"), "unknown press 'SnapKVPresss'"),
        (lambda: kvpress_model("m", folder, 8192, compression_ratio=1.0), "compression_ratio 1.0 is outside [0, 1)"),
        (lambda: kvpress_model("m", folder, 8192, compression_ratio=-0.1), "outside [0, 1)"),
        (lambda: kvpress_model("m", folder, 8192, query="later"), "query 'later'; choose from"),
        (lambda: kvpress_model("m", folder, 8192, press="FinchPress"), "FinchPress does not support query='agnostic'"),
        (lambda: kvpress_model("m", folder, 8192, press="DecodingPress"), "compresses while decoding"),
        (lambda: kvpress_model("m", folder, 8192, press_kwargs={"windows": 3}), "SnapKVPress({'windows': 3}) refused"),
        (lambda: kvpress_model("m", folder, 8192, press="AdaKVPress"), "wraps a press"),
        (lambda: kvpress_sweep(_base(), ["FinchPress"], [0.5]), "FinchPress supports query='aware' only"),
        (lambda: kvpress_sweep(_base(), ["SnapKVPress"], [0.5, 0.5]), "repeat a value"),
        # a config written by hand: the model class checks before it reads a byte of the (absent) weights
        (lambda: KVPressModel(str(tmp_path / "absent"), kv_press={"press": "NoPress"}), "unknown press 'NoPress'"),
    ]
    for make, expected in cases:
        with pytest.raises(ConfigError) as err:
            make()
        message = str(err.value)
        assert expected in message and "\n" not in message, message
    listed = str(pytest.raises(ConfigError, kvpress_model, "m", folder, 8192, press="X").value)
    assert "StreamingLLMPress" in listed and "KnormPress" in listed  # the installed kvpress's presses, named
    assert check_model({**kvpress_model("m", folder, 8192), "batch_size": 4}) == [
        "m: a KV-cache press compresses one prompt at a time (batch_size 1)"
    ]
    wrapped = kvpress_model("m", folder, 8192, press="AdaKVPress", press_kwargs={"press": "SnapKVPress"})
    assert wrapped["kv_press"]["settings"] == {"press": "SnapKVPress"}


def test_a_sweep_is_the_baseline_and_one_model_per_press_ratio_and_mode() -> None:
    models = kvpress_sweep(_base(), ["SnapKVPress", "FinchPress"], [0.25, 0.5], queries=["agnostic", "aware"])
    assert [m["abbr"] for m in models] == [
        "smollm2",
        "smollm2@snapkv-0.25-agnostic",
        "smollm2@snapkv-0.50-agnostic",
        "smollm2@snapkv-0.25-aware",
        "smollm2@snapkv-0.50-aware",
        "smollm2@finch-0.25-aware",  # Finch is query-aware only: no agnostic model for it
        "smollm2@finch-0.50-aware",
    ]
    assert all(check_model(m) == [] for m in models)
    assert models[1]["kv_press"] == PressSpec("SnapKVPress", 0.25, "agnostic").to_dict()
    assert models[1]["model_kwargs"] == models[0]["model_kwargs"] and models[1]["batch_size"] == 1


def test_a_head_wise_press_keeps_what_its_ratio_says() -> None:
    """AdaKV and CriticalAdaKV mask entries per KV head inside the cache instead of dropping them: the cache stays
    whole, and ``kept`` is what the masks leave. The rule, exact: every layer keeps kvpress's
    ``max(1, int(tokens * (1 - ratio)))`` entries per KV head (it masks KV heads x the rest); the question is
    prefilled on top, whole. A prompt after them, without a press, keeps everything (no mask left behind)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from needlebench.methods.compressed_generation import generate_compressed
    from needlebench.methods.kv_press import build_press

    folder = smollm2_folder()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    context = tokenizer("The quick brown fox jumps over the lazy dog. " * 12, add_special_tokens=False)["input_ids"]
    question = tokenizer(" What does the fox jump over?", add_special_tokens=False)["input_ids"]
    assert (len(context), len(question)) == (121, 7)
    layers, heads = model.config.num_hidden_layers, model.config.num_key_value_heads
    assert (layers, heads) == (30, 3)
    seen = []
    for press in ("AdaKVPress", "CriticalAdaKVPress"):
        for ratio, query in ((0.5, "agnostic"), (0.25, "aware")):
            spec = PressSpec(press, ratio, query, {"press": "SnapKVPress"})
            done = generate_compressed(model, context, question, build_press(spec), query, 2, set(), lambda _: False)
            cache = done.cache
            want = expected_kept(cache.compressed_tokens, ratio)
            masked = {len(layer.self_attn.masked_key_indices[0]) for layer in model.model.layers}
            assert masked == {heads * (cache.compressed_tokens - want)}, (press, query)  # masked, not dropped
            assert cache.kept == (want,) * layers and cache.to_dict()["kept"] == want, (press, query, cache)
            assert [a - k for a, k in zip(cache.after_question, cache.kept)] == [cache.question_tokens] * layers
            seen.append((press, query, cache.compressed_tokens, want, cache.question_tokens))
    assert seen == [
        ("AdaKVPress", "agnostic", 121, 60, 7),
        ("AdaKVPress", "aware", 128, 96, 0),
        ("CriticalAdaKVPress", "agnostic", 121, 60, 7),
        ("CriticalAdaKVPress", "aware", 128, 96, 0),
    ]
    plain = generate_compressed(model, context, question, None, "agnostic", 2, set(), lambda _: False).cache
    assert (plain.kept, plain.after_question) == ((121,) * layers, (128,) * layers)


def _run(config: str, work: Path) -> Path:
    return run_opencompass(config, work, command=[bin_path("needlebench"), "run"], timeout=3000)


def _predictions(run: Path, model: str) -> dict[tuple[str, str], object]:
    out = {}
    for path in sorted((run / "predictions" / model).glob("needlebench_*.json")):
        for key, entry in json.loads(path.read_text(encoding="utf-8")).items():
            out[(path.stem, key)] = entry["prediction"]
    return out


def _records(run: Path, model: str) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted((run / "results" / model).glob("*samples*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def _question_tokens(run: Path, model: str) -> dict[str, int]:
    """Per sample id, its question part's length in SmolLM2 tokens, counted here from the prompt the model got.

    The question part is the text after the document (docs/guide/kv-compression.md): OpenCompass's reference
    frame closes the document with a newline and ``</Document>`` (``</文档>``) and asks after it; the prompt is rendered
    with the chat template as OpenCompass's Hugging Face model renders it, and the question's tokens are those
    from the first one that reaches into that text to the end (the assistant turn's opening included).
    """
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder())
    folder = run / "predictions" / model
    out = {}
    for path in sorted((run / "results" / model).glob("*.samples.jsonl")):
        abbr = path.name.removesuffix(".samples.jsonl")
        whole = folder / f"{abbr}.json"
        parts = (
            [whole]
            if whole.exists()
            else sorted(folder.glob(f"{abbr}_*.json"), key=lambda p: int(p.stem[len(abbr) + 1 :]))
        )
        entries = [
            e
            for p in parts
            for _, e in sorted(json.loads(p.read_text(encoding="utf-8")).items(), key=lambda kv: int(kv[0]))
        ]
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for record, entry in zip(records, entries, strict=True):
            (turn,) = [m["prompt"] for m in entry["origin_prompt"] if m["role"] == "HUMAN"]
            messages = [{"role": "user", "content": turn}]
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            start = max(text.rfind("\n</Document>"), text.rfind("\n</文档>"))
            assert start > 0, record["id"]
            ends = [
                end
                for _, end in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
            ]
            out[record["id"]] = sum(end > start for end in ends)
    return out


def _check_caches(run: Path, models: list[str]) -> int:
    """Every press sample's cache: each layer kept the ratio's share of the compressed tokens (within one), and
    in agnostic mode the question was prefilled after compression, whole: its token count the question part's,
    counted here from the prompt (:func:`_question_tokens`)."""
    checked = 0
    for model in models:
        questions = _question_tokens(run, model)
        for rec in _records(run, model):
            cache = rec["kv_cache"]
            kept = cache["kept"] if isinstance(cache["kept"], list) else [cache["kept"]]
            want = expected_kept(cache["compressed_tokens"], cache["compression_ratio"])
            assert all(abs(k - want) <= 1 for k in kept), (model, rec["id"], cache)
            after = cache["after_question"] if isinstance(cache["after_question"], list) else [cache["after_question"]]
            if cache["query"] == "agnostic":
                assert cache["question_tokens"] == questions[rec["id"]], (model, rec["id"], cache)
                assert [a - k for a, k in zip(after, kept)] == [cache["question_tokens"]] * len(kept)
            else:
                assert cache["question_tokens"] == 0 and after == kept
            checked += 1
    return checked


def test_each_variant_of_the_wiring_config_is_planned_with_the_model_it_varies() -> None:
    """The wiring config as ``needlebench plan`` reads it: the press built by hand finds the plain model by identity,
    the press over the RoPE-swept model finds that model, and the plan's text says each (no model loads)."""
    from needlebench.commands.plan import format_plan, plan_config

    plan = plan_config("tests/configs/e2e_variants.py")
    said = [line.strip() for line in format_plan(plan).splitlines() if line.strip().startswith("variant of")]
    assert said == [
        "variant of smollm2: press SnapKVPress, ratio 0.00, query agnostic",
        "variant of smollm2: rope yarn, factor 2",
        "variant of smollm2@yarn-x2: press FinchPress, ratio 0.50, query aware",
    ]
    # the same press by hand with another output budget is a model of its own: no baseline, one line says so
    from needlebench.planning.variants import plan_variants

    other = kvpress_model("budget-99", smollm2_folder(), 8192, press="SnapKVPress", max_out_len=99, num_gpus=0)
    variants, notes = plan_variants([_base(), other])
    assert variants["budget-99"].of is None and len(notes) == 1 and "'budget-99'" in notes[0], notes


PRESSED = ["press-on", "smollm2@yarn-x2@finch-0.50-aware"]


@pytest.mark.e2e
def test_presses_and_a_rope_factor_run_as_models_of_one_opencompass_run(tmp_path: Path) -> None:
    """The wiring: the plain model, a press built by hand, a RoPE-swept model and a press swept over it, through
    the real opencompass. Ratio 0 answers byte for byte as the plain model; each sample's cache as its ratio says
    (the question prefilled after compression, whole, before the question is seen); each loaded engine says the
    scaling it ran; every variant finds the model it varies in the plan (the hand-built one by identity, the press
    over the scaled model that model), never from a name; the tables, curves, difference maps, board labels and
    the bundle follow."""
    from needlebench.runfolder.plan_file import read_plan
    from needlebench.runfolder.request_log import read_requests

    run = _run("tests/configs/e2e_variants.py", tmp_path / "work")
    plain, zero = _predictions(run, "smollm2"), _predictions(run, "press-on")
    assert plain and {k: v["prediction"] for k, v in zero.items()} == plain  # type: ignore[index]
    assert _check_caches(run, PRESSED) == 4
    # the question part is the row's (meta question_chars): its tokens are the prompt's last ones, uncompressed
    questions = {r["kv_cache"]["question_tokens"] for r in _records(run, "press-on")}
    # the reference question's part, as SmolLM2 tokenizes it: "\n</Document>\n\nBased on the information in the
    # document, now please answer: What is the official instrument of the Stiskstoulfoun Guild? Please answer in
    # the format of 'The official instrument of the Stiskstoulfoun Guild is ______.'\n" (from the token holding its
    # first newline), the "\n" OpenCompass adds to the turn, and the chat template's end of turn and assistant turn
    assert questions == {62}
    scaled = {"factor": 2.0, "original_max_position_embeddings": 8192, "rope_type": "yarn", "type": "yarn"}
    ran = {
        m: [r["rope"]["scaling"] for r in read_requests(run / "predictions" / m)]
        for m in ("smollm2", "smollm2@yarn-x2")
    }
    assert ran == {"smollm2": [None], "smollm2@yarn-x2": [scaled]}  # what each loaded engine's config says
    plan = read_plan(run)
    variant = {m.abbr: m.model_variant and (m.model_variant["axis"], m.model_variant["of"]) for m in plan.models}
    assert {m.abbr: (m.window or {}).get("usable") for m in plan.models} == {
        "smollm2": 8192,
        "press-on": 8192,
        "smollm2@yarn-x2": 16384,
        "smollm2@yarn-x2@finch-0.50-aware": 16384,
    }
    assert variant == {
        "smollm2": None,
        "press-on": ("press", "smollm2"),
        "smollm2@yarn-x2": ("rope", "smollm2"),
        "smollm2@yarn-x2@finch-0.50-aware": ("press", "smollm2@yarn-x2"),
    }
    with (run / "summary" / "needlebench_methods.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["model"]: r["baseline"] for r in rows} == {
        "smollm2": "smollm2",
        "press-on": "smollm2",
        "smollm2@yarn-x2": "smollm2@yarn-x2",
        "smollm2@yarn-x2@finch-0.50-aware": "smollm2@yarn-x2",
    }
    assert all(r["scored"] == r["samples"] == "2" for r in rows)
    assert all(r["kept as the ratio says"] == "True" for r in rows if r["press"] != "none")
    with (run / "summary" / "needlebench_rope_factors.csv").open(encoding="utf-8") as fh:
        factors = {r["model"]: (r["factor"], r["baseline"], r["scored"]) for r in csv.DictReader(fh)}
    assert factors == {"smollm2": ("1.00", "smollm2", "2"), "smollm2@yarn-x2": ("2.00", "smollm2", "2")}
    bundle = json.loads((run / "summary" / "results.json").read_text(encoding="utf-8"))
    assert {m: (v["axis"], v["of"]) for m, v in bundle["variants"].items()} == {k: v for k, v in variant.items() if v}
    board = {r["model"]: r["labels"] for r in bundle["leaderboard"]}
    assert {k: board["smollm2@yarn-x2@finch-0.50-aware"][k] for k in ("press", "ratio", "query")} == {
        "press": "FinchPress",
        "ratio": "0.50",
        "query": "aware",
    }
    assert board["smollm2"]["press"] == "none" and board["smollm2"]["rope"] == "none"
    assert (board["smollm2@yarn-x2"]["factor"], board["smollm2@yarn-x2"]["press"]) == ("2", "none")
    figures = {p.name for p in (run / "summary" / "figures").iterdir()}
    assert {"kv_ratio_S-RT_en_smollm2_yarn-x2.png", "rope_factor_S-RT_en_smollm2.png"} <= figures
    # each variant against the model it varies, and nothing else
    assert {p for p in figures if p.startswith("diffmap_")} == {
        "diffmap_srt_en_press-on_vs_smollm2.png",
        "diffmap_srt_en_smollm2_yarn-x2_vs_smollm2.png",
        "diffmap_srt_en_smollm2_yarn-x2_finch-0.50-aware_vs_smollm2_yarn-x2.png",
    }
    verified = subprocess.run(
        [bin_path("needlebench"), "verify", str(run / "summary" / "results.json"), str(run)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr


SWEEP = [
    f"smollm2@{press}-{ratio:.2f}-{query}"
    for press, query in (("streamingllm", "agnostic"), ("snapkv", "agnostic"), ("finch", "aware"))
    for ratio in (0.25, 0.5, 0.75)
]


@pytest.mark.e2e
@pytest.mark.methods
def test_three_presses_at_three_ratios_in_both_languages(tmp_path: Path) -> None:
    """The issue's run: StreamingLLM, SnapKV and Finch (query aware only) at 0.25, 0.5 and 0.75 plus the plain
    model, S-RT and M-RT at 1k, 2k and 4k in English and Chinese; every table, the report and the leaderboard
    hold every method, and every sample's cache is as its ratio says."""
    run = _run("tests/configs/e2e_kvpress_sweep.py", tmp_path / "work")
    assert _check_caches(run, SWEEP) == 9 * 12
    with (run / "summary" / "needlebench_summary.csv").open(encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert all(m in header for m in ["smollm2", *SWEEP])
    with (run / "summary" / "needlebench_methods.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["task"], r["lang"], r["length"]) for r in rows} == {
        (t, lang, length) for t in ("S-RT", "M-RT") for lang in ("EN", "ZH") for length in ("1000", "2000", "4000")
    }
    assert sorted({r["model"] for r in rows}) == sorted(["smollm2", *SWEEP])
    figures = {p.name for p in (run / "summary" / "figures").iterdir()}
    for task in ("S-RT", "M-RT"):
        for lang in ("en", "zh"):
            assert f"kv_ratio_{task}_{lang}_smollm2.png" in figures
    assert {
        f"mrt_recall_by_position_{p}_{q}_smollm2.png"
        for p, q in (("StreamingLLMPress", "agnostic"), ("SnapKVPress", "agnostic"), ("FinchPress", "aware"))
    } <= figures
    html = (run / "summary" / "report.html").read_text(encoding="utf-8")
    assert all(m in html for m in SWEEP)
    board = subprocess.run(
        [bin_path("needlebench"), "leaderboard", str(run), "-o", str(tmp_path / "board")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert board.returncode == 0, board.stdout + board.stderr
    text = "\n".join(p.read_text(encoding="utf-8") for p in (tmp_path / "board").glob("*.csv"))
    assert all(m in text for m in SWEEP) and "StreamingLLMPress" in text and "aware" in text


def test_a_rows_question_is_its_prompts_own_text_and_a_count_past_the_prompt_is_one_message() -> None:
    """The inferencer hands a press model each row's question as text (the prompt's last ``question_chars``
    characters), which the model finds where it stands in the turn (the template may add a newline after it);
    a count the prompt cannot hold stops with one message instead of cutting elsewhere."""
    from needlebench.errors import ConfigError
    from needlebench.opencompass.inferencer import _question

    assert _question({"prompt": "the document\nthe question?\n", "meta": json.dumps({"question_chars": 14})}) == (
        "the question?\n"
    )
    assert _question({"prompt": "no split", "meta": json.dumps({})}) is None
    with pytest.raises(ConfigError, match=r"^question_chars 12 does not fit the row's prompt \(5 characters\)$"):
        _question({"prompt": "short", "meta": json.dumps({"question_chars": 12})})
