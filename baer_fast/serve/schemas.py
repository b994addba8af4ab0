"""Request bodies (pydantic, strict: a number is not a string) and the result fields."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RESULT_FIELDS = ("score", "p_a", "winner", "head", "expert")


class PairIn(BaseModel):
    model_config = ConfigDict(strict=True)
    question: str
    response_a: str
    response_b: str
    subset: str | None = Field(default=None, min_length=1)     # as in a pairs file: a per-subset head's
    category: str | None = Field(default=None, min_length=1)   # experts, the stack's interaction blocks


class JudgeRequest(BaseModel):
    model_config = ConfigDict(strict=True)
    pairs: list[PairIn]


class RewardRequest(BaseModel):
    """OpenRLHF's remote reward model request: query[i] = prompts[i] + completion i."""
    model_config = ConfigDict(strict=True)
    query: list[str]
    prompts: list[str] | None = None
    labels: list | None = None                 # accepted and not read: BAER judges without references
    method: Literal["mean_win", "bradley_terry"] | None = None
