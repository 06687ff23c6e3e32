"""Readers of LLM answers, plan keeping, selector ids and the config: plain functions, no server."""

from __future__ import annotations

import pytest

from ksci.llm import designer, selector, writer
from ksci.llm.config import LlmConfigError, load_config
from ksci.llm.parse import apply_edits, extract_code, extract_json, parse_edits, parse_structured

SOURCE = 'extern "C" int fp8_gemm(int m) {\n    int tile = 64;\n    return tile;\n}\n'


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        'Sure! Here it is:\n```json\n{"a": 1}\n```\nanything else?',
        'The answer is {"a": 1} as asked.',
        '```\n{"a": 1}\n```',
    ],
)
def test_json_is_found_in_plain_fenced_and_chatty_answers(text):
    assert extract_json(text) == ({"a": 1}, None)


def test_malformed_json_and_schema_violations_say_why():
    assert extract_json('{"a": ')[1] == "no JSON object in the answer"
    assert extract_json("   ")[1] == "empty answer"
    value, problem = parse_structured('{"base_id": 3, "reference_id": null, "reason": "x"}', selector.SCHEMA)
    assert value is None and "base_id" in problem and "not of type 'string'" in problem


def test_the_longest_code_block_is_the_kernel_and_an_unclosed_one_is_truncated():
    text = f"Plan:\n```text\nnotes\n```\n```cpp\nint x;\n```\n```cuda\n{SOURCE}```"
    assert extract_code(text) == (SOURCE, None)
    assert extract_code("no code here")[1] == "no code block in the answer"
    assert "never closed" in extract_code(f"```cuda\n{SOURCE}")[1]


def test_search_replace_edits_apply_exactly_or_with_other_indentation():
    text = "<<<<<<< SEARCH\n    int tile = 64;\n=======\n    int tile = 128;\n>>>>>>> REPLACE\n"
    assert apply_edits(SOURCE, parse_edits(text)) == (SOURCE.replace("64", "128"), None)
    reindented = "<<<<<<< SEARCH\nint tile = 64;\n=======\n    int tile = 32;\n>>>>>>> REPLACE"
    assert apply_edits(SOURCE, parse_edits(reindented))[0] == SOURCE.replace("64", "32")


def test_an_edit_that_does_not_match_fails_clearly():
    text = "<<<<<<< SEARCH\nint tile = 256;\n=======\nint tile = 1;\n>>>>>>> REPLACE"
    source, problem = apply_edits(SOURCE, parse_edits(text))
    assert (
        source is None
        and problem == "edit 1: SEARCH block not found in the Base source (first line: 'int tile = 256;')"
    )
    twice = SOURCE + "    int tile = 64;\n"
    assert "matches 2 places" in apply_edits(twice, [("    int tile = 64;", "x")])[1]


def test_the_writer_answer_must_define_the_entry_point_and_loses_copied_headers():
    context = {"base_source": SOURCE, "entry_name": "fp8_gemm"}
    kernel, problem = writer.parse_answer(f"```cuda\n// ksci: rendered from cuda/mma with BM=64\n{SOURCE}```", context)
    assert problem is None and kernel.form == "source" and "// ksci:" not in kernel.code
    assert "entry point" in writer.parse_answer("```cuda\n__global__ void k() {}\n```", context)[1]
    edited, _ = writer.parse_answer("<<<<<<< SEARCH\nreturn tile;\n=======\nreturn 0;\n>>>>>>> REPLACE", context)
    assert edited.form == "edits" and "return 0;" in edited.code


def _plan(title, innovation, low, high):
    return designer.Plan(title, "d", ("r",), low, high, innovation)


def test_three_distinct_plans_are_kept_most_innovative_highest_max_highest_min():
    plans = (
        _plan("a", 9, 1, 50),
        _plan("b", 2, 1, 40),
        _plan("c", 3, 9, 10),
        _plan("d", 1, 2, 45),
        _plan("e", 5, 5, 5),
    )
    kept = designer.keep_three(plans)
    assert [(p.title, p.kept_as) for p in kept] == [
        ("a", "most innovative"),
        ("d", "highest maximum uplift"),
        ("c", "highest minimum uplift"),
    ]
    assert len(designer.keep_three(plans[:2])) == 2
    assert kept[0].hypothesis().startswith("a [most innovative; expected uplift 1% to 50%, innovation 9/10]")


def test_selector_ids_must_be_in_the_population_and_may_be_shortened():
    ids = ["0123456789abcdef", "fedcba9876543210"]
    answer = '{"base_id": "0123456", "reference_id": "fedcba9876543210", "reason": "fast"}'
    chosen, problem = selector.parse_answer(answer, {"ids": ids})
    assert problem is None and (chosen.base_id, chosen.reference_id) == tuple(ids)
    bad = '{"base_id": "deadbeef00000000", "reference_id": null, "reason": "?"}'
    assert "not a timed candidate" in selector.parse_answer(bad, {"ids": ids})[1]


def test_config_comes_from_file_then_environment_then_options(tmp_path):
    path = tmp_path / "ksci.toml"
    path.write_text(
        '[llm]\nbase_url = "http://file/v1"\nmodel = "m-file"\nbudget_usd = 2.5\n'
        '[llm.stages.writer]\nmodel = "m-writer"\nmax_tokens = 100\n[llm.prices.m-file]\nprompt = 1\ncompletion = 2\n'
    )
    config = load_config(path, env={"KSCI_LLM_MODEL": "m-env", "KSCI_LLM_API_KEY": "sk-x"}, base_url="http://cli/v1")
    assert config.base_url == "http://cli/v1" and config.model == "m-env" and config.api_key_env == "KSCI_LLM_API_KEY"
    assert config.stage("writer").model == "m-writer" and config.stage("writer").max_tokens == 100
    assert config.budget.usd == 2.5 and config.price("m-file").cost(1_000_000, 1_000_000) == 3.0
    assert "sk-x" not in repr(config)  # only the variable's name is kept


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[llm]\napi_key = "sk-1"\n', "do not put the API key in a file"),
        ("[llm]\nmodle = 'x'\n", "unknown key(s) modle"),
        ("[llm\n", "not valid TOML"),
        ("[llm]\nretries = -1\n", "retries and repairs must be >= 0"),
        ("[llm.stages.writr]\nmodel = 'x'\n", "[llm.stages.writr] takes"),
    ],
)
def test_bad_config_files_get_a_clear_error(tmp_path, text, message):
    path = tmp_path / "ksci.toml"
    path.write_text(text)
    with pytest.raises(LlmConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_config(path, env={})


def test_a_stage_without_a_model_is_a_clear_error():
    with pytest.raises(LlmConfigError, match="no model configured"):
        load_config(env={"KSCI_LLM_BASE_URL": "http://x/v1"}).stage("designer")


def test_the_llm_calls_doc_lists_every_column_in_order():
    import re

    from ksci import PROJECT_ROOT
    from ksci.llm.ledger import CALLS_SCHEMA

    doc = (PROJECT_ROOT / "docs" / "llm.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+?) \| (yes|no) \|", doc, flags=re.M)
    assert [name for name, _, _ in rows] == CALLS_SCHEMA.names
    assert all((nullable == "yes") == CALLS_SCHEMA.field(name).nullable for name, _, nullable in rows)


def test_findings_are_stored_once_per_generation(tmp_path):
    from ksci.llm.findings import as_lines
    from ksci.llm.ledger import Finding, LlmLedger

    ledger = LlmLedger(tmp_path)
    assert ledger.add_findings("run1", 1, [Finding("worked", "64-row tiles help", "b1: -20%")]) == 1
    assert ledger.add_findings("run1", 1, [Finding("failed", "again", "")]) == 0  # a rerun of generation 1
    assert as_lines(ledger.findings("run1")) == ["[generation 1, worked] 64-row tiles help (b1: -20%)"]
