"""Request bodies (pydantic, strict: a number is not a string) and the result fields.

A pair's question is a string or a conversation, as in a pairs file: a list of
{"role", "content"} messages alternating from the user's, ending with the user's turn.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator
from pydantic_core import PydanticCustomError

RESULT_FIELDS = ("score", "p_a", "winner", "head", "expert")


def _question(value):
    """A string as is; a conversation as a tuple of (role, content) turns (io.records.as_conversation)."""
    from baer_fast.io.records import as_conversation
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        bad = next((i for i, m in enumerate(value) if not isinstance(m, dict)), None)
        if bad is not None:
            raise PydanticCustomError("conversation", "conversation: message {i}: expected a {role, content} "
                                      "object", {"i": bad})
        try:
            return as_conversation(value)
        except (ValueError, TypeError) as e:
            raise PydanticCustomError("conversation", "conversation: {why}", {"why": str(e)}) from None
    raise PydanticCustomError("question_type", "Input should be a valid string or a list of "
                              "{role, content} messages")


class PairIn(BaseModel):
    # extra="forbid": a misspelt field ("subsets") is a 422, not a pair judged without it
    model_config = ConfigDict(strict=True, extra="forbid")
    question: Annotated[object, PlainValidator(_question)]
    response_a: str
    response_b: str
    subset: str | None = Field(default=None, min_length=1)     # as in a pairs file: a per-subset head's
    category: str | None = Field(default=None, min_length=1)   # experts, the stack's interaction blocks
    id: object = None       # the pairs file's other fields: accepted and not read, so a record
    label: object = None    # can be sent as it is (a label is never read: no leakage)
    split: object = None
    meta: object = None


class JudgeRequest(BaseModel):
    # a field beside "pairs" ("subsets": [...] meant for every pair) is a 422, as inside a pair;
    # RewardRequest stays open: OpenRLHF's callers may add fields of their own
    model_config = ConfigDict(strict=True, extra="forbid")
    pairs: list[PairIn]


class RewardRequest(BaseModel):
    """OpenRLHF's remote reward model request: query[i] = prompts[i] + completion i."""
    model_config = ConfigDict(strict=True)
    query: list[str]
    prompts: list[str] | None = None
    labels: list | None = None                 # accepted and not read: BAER judges without references
    method: Literal["mean_win", "bradley_terry"] | None = None
