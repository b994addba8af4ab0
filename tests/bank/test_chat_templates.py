"""Chat templates that take no system message (Gemma, early Mistral) and templates that fail."""
import logging

import pytest

from baer_fast.errors import InputError
from baer_fast.protocols.base import SYSTEM
from baer_fast.bank.prompting import PromptEncoder
from baer_fast.bank.runner import RunReport, run_experts
from tests.fixtures.checks import max_run_diff
from tests.fixtures.tiny_models import LLAMA_TEMPLATE, build_model_dir, make_pairs

NO_SYSTEM = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
             + LLAMA_TEMPLATE)
BROKEN = "{{ raise_exception('this template renders nothing') }}"
# Llama 3.2/3.3's date logic: today's date unless the caller gives date_string
LLAMA32_DATES = ('{%- if not date_string is defined %}{%- if strftime_now is defined %}'
                 '{%- set date_string = strftime_now("%d %b %Y") %}{%- else %}{%- set date_string = "26 Jul 2024" %}'
                 '{%- endif %}{%- endif %}Today Date: {{ date_string }}\n' + LLAMA_TEMPLATE)
TODAY_ALWAYS = "Today is {{ strftime_now('%B %d, %Y') }}.\n" + LLAMA_TEMPLATE


@pytest.fixture(scope="module")
def no_system(tmp_path_factory, loaded_models):
    return loaded_models(build_model_dir(str(tmp_path_factory.mktemp("nosys")), arch="llama", seed=4,
                                         chat_template=NO_SYSTEM))


def test_system_text_opens_the_user_message(no_system, caplog):
    from baer_fast.protocols import direct
    enc = PromptEncoder(no_system.tokenizer, model_name="nosys", context_len=no_system.context_len)
    prompts = direct.prompts("What is 2 + 2?", "4", "5")
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        texts = [enc.render(p) for p in prompts]
        again = PromptEncoder(no_system.tokenizer, model_name="nosys", context_len=no_system.context_len)
        assert again.render(prompts[0]) == texts[0]          # the runner's next chunk: no retry, no warning
    assert sum("takes no system message" in r.getMessage() for r in caplog.records) == 1
    for p, text in zip(prompts, texts):
        assert "system" not in text.split(SYSTEM)[0]                       # no system turn before it
        assert f"user<|end_header_id|>\n\n{SYSTEM}\n\n{p.user}".strip() in text


def test_bank_runs_and_shares_prefixes(no_system):
    pairs = make_pairs(3, seed=4)
    rep_e, rep_n = RunReport(), RunReport()
    got = run_experts(no_system, pairs, experts=["direct", "score", "pointwise"], report=rep_e)
    want = run_experts(no_system, pairs, experts=["direct", "score", "pointwise"], naive=True, report=rep_n)
    assert max_run_diff(got, want) <= 1e-5
    assert rep_e.stats.tokens_prefilled < rep_n.stats.tokens_prefilled / 2


def test_a_template_that_fails_names_the_model(tmp_path, loaded_models):
    from baer_fast.protocols import direct
    m = loaded_models(build_model_dir(str(tmp_path / "broken"), arch="llama", chat_template=BROKEN))
    enc = PromptEncoder(m.tokenizer, model_name="broken-llama", context_len=m.context_len)
    with pytest.raises(InputError, match="broken-llama.*renders nothing"):
        enc.render(direct.prompts("q", "a", "b")[0])


def _render_one(tmp_path, loaded_models, template, name):
    from baer_fast.protocols import direct
    m = loaded_models(build_model_dir(str(tmp_path / name), arch="llama", chat_template=template))
    enc = PromptEncoder(m.tokenizer, model_name=name, context_len=m.context_len)
    return enc.render(direct.prompts("q", "a", "b")[0])


def test_llama32_date_is_fixed(tmp_path, loaded_models, caplog):
    """Prompts do not carry the day they are rendered on, so verdicts and resumes are the same any day."""
    from datetime import datetime
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        text = _render_one(tmp_path, loaded_models, LLAMA32_DATES, "llama32")
    assert "Today Date: 26 Jul 2024" in text and datetime.now().strftime("%d %b %Y") not in text
    assert not any("today's date" in r.getMessage() for r in caplog.records)


def test_a_template_writing_today_is_flagged(tmp_path, loaded_models, caplog):
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        _render_one(tmp_path, loaded_models, TODAY_ALWAYS, "dated")
    assert sum("writes today's date" in r.getMessage() for r in caplog.records) == 1
