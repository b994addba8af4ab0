"""Protocol prompts -> token ids with the model's own chat template; verdict labels -> token ids.

Each full prompt is rendered and tokenized once (a batch of prompts in one tokenizer call);
those ids are what both the naive path and the prefix engine consume, so sharing can never
change them. Labels must be single tokens, and a prompt longer than the context window is an
error (never silently truncated).
"""
from __future__ import annotations

import logging

from baer_fast.errors import InputError, PromptTooLong

log = logging.getLogger("baer_fast")

# Llama 3.2/3.3 templates write "Today Date: <strftime_now()>" into every prompt unless given
# `date_string`: a fixed one (Llama's own fallback) keeps prompts, hence verdicts, the same on any day
DATE_STRING = "26 Jul 2024"
_TODAY_FORMATS = ("%d %b %Y", "%d %B %Y", "%B %d, %Y", "%b %d, %Y", "%Y-%m-%d")
# (model name, chat template) -> whether the system text is folded into the user message: found on
# the first render in this process, so the runner's encoder per chunk neither retries nor re-warns
_FOLD_SYSTEM: dict[tuple[str, str], bool] = {}


class PromptEncoder:
    def __init__(self, tokenizer, *, model_name: str, context_len: int):
        self.tok, self.model_name, self.context_len = tokenizer, model_name, context_len
        self._labels: dict[tuple, tuple[int, ...]] = {}
        template = tokenizer.chat_template
        self._template_key = (model_name, template if isinstance(template, str) else repr(template))

    @classmethod
    def of(cls, loaded) -> "PromptEncoder":
        """The encoder of a loaded judge: its tokenizer and chat template, within its context window."""
        return cls(loaded.tokenizer, model_name=loaded.name, context_len=loaded.context_len)

    @property
    def folds_system(self) -> bool:
        """Whether this template's prompts carry the system text in the user message (known after
        the first render in this process; False before it)."""
        return bool(_FOLD_SYSTEM.get(self._template_key))

    def label_ids(self, labels: tuple[str, ...]) -> tuple[int, ...]:
        if labels not in self._labels:
            self._labels[labels] = tuple(self._one_token(lab) for lab in labels)
        return self._labels[labels]

    def _one_token(self, label: str) -> int:
        ids = self.tok.encode(label, add_special_tokens=False)
        if len(ids) != 1:
            raise InputError(f"verdict label {label!r} is {len(ids)} tokens in the tokenizer of model "
                             f"{self.model_name!r}; constrained readout needs single-token labels")
        return ids[0]

    def render(self, prompt) -> str:
        """The prompt through the model's chat template, with a system message where the template
        takes one; where it refuses one (Gemma, early Mistral: "System role not supported", roles
        must alternate), the system text opens the user message instead, for every prompt alike."""
        from jinja2.exceptions import TemplateError
        fold = _FOLD_SYSTEM.get(self._template_key)
        if fold is not None:
            return self._apply(prompt.messages(fold_system=fold))
        try:
            text, fold = self._apply(prompt.messages()), False
        except TemplateError as e:
            try:
                text, fold = self._apply(prompt.messages(fold_system=True)), True
            except TemplateError:
                raise InputError(f"the chat template of model {self.model_name!r} fails on a judge prompt: "
                                 f"{e}") from e
            log.warning("the chat template of %r takes no system message (%s); the judge's system text "
                        "opens the user message instead", self.model_name, e)
        _FOLD_SYSTEM[self._template_key] = fold
        self._warn_if_dated(text)
        return text

    def _warn_if_dated(self, text: str) -> None:
        """A template that still writes today's date (strftime_now, not date_string) makes the
        prompts, and so the verdicts, depend on the day they are run: say so (once per process)."""
        from datetime import datetime
        now = datetime.now()
        if "strftime_now" in self._template_key[1] and any(now.strftime(f) in text for f in _TODAY_FORMATS):
            log.warning("the chat template of %r writes today's date into every prompt; verdicts can differ "
                        "between days (a run and its resume on another day, for instance)", self.model_name)

    def _apply(self, messages) -> str:
        # enable_thinking=False: templates that support it (Qwen3) open a non-thinking answer
        return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                            enable_thinking=False, date_string=DATE_STRING)

    def encode(self, prompt, *, pair_id: str, expert: str) -> tuple[int, ...]:
        return self.encode_all([(prompt, pair_id, expert)])[0]

    def encode_all(self, items) -> list[tuple[int, ...]]:
        """items: (prompt, pair_id, expert) -> token ids of each, from one batched tokenizer call
        (the Rust tokenizer spreads a batch over the cores; the ids equal one call per prompt)."""
        items = list(items)
        if not items:
            return []
        texts = [self.render(prompt) for prompt, _, _ in items]
        out = [tuple(ids) for ids in self.tok(texts, add_special_tokens=False)["input_ids"]]
        for ids, (prompt, pair_id, expert) in zip(out, items):
            if len(ids) > self.context_len:
                raise PromptTooLong(f"the {expert}/{prompt.key} prompt is {len(ids)} tokens, longer than the "
                                    f"context window of {self.model_name!r} ({self.context_len})", pair_id=pair_id)
        return out
