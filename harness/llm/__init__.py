"""The only package that talks to a model.

* :mod:`harness.llm.types`: provider-neutral requests and replies;
* :mod:`harness.llm.client`: :class:`ModelClient`, one model under the session's policy;
* :mod:`harness.llm.policy`: :class:`CallPolicy`, the cache, concurrency, rate limits, batching and cost cap
  that wrap every provider once;
* :mod:`harness.llm.prices`: the price table; :mod:`harness.llm.cache`, :mod:`harness.llm.ratelimit`,
  :mod:`harness.llm.batching`: the policy's parts;
* :mod:`harness.llm.providers`: the provider interface and registry, a module per provider.

docs/model-calls.md has the whole picture.
"""

from harness.base.models import ModelSettings
from harness.base.usage import Usage
from harness.llm.client import ModelClient, extract_json_object
from harness.llm.policy import CallPolicy, CallStats, CostCapReached
from harness.llm.prices import PRICES_PER_MTOK, Price, known_price, load_price_table, missing_price_line, price_usd
from harness.llm.types import (
    GenerationResult,
    Message,
    ModelReply,
    ModelRequest,
    TokenLogprob,
    ToolCall,
    ToolResult,
    ToolSpec,
)

__all__ = [
    "PRICES_PER_MTOK", "CallPolicy", "CallStats", "CostCapReached", "GenerationResult", "Message", "ModelClient",
    "ModelReply", "ModelRequest", "ModelSettings", "Price", "TokenLogprob", "ToolCall", "ToolResult", "ToolSpec",
    "Usage", "extract_json_object", "known_price", "load_price_table", "missing_price_line", "price_usd",
]
