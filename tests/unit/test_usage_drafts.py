"""Usage reports speculative decoding's drafts kept and refused, by OpenAI's Predicted Outputs
names, in the Responses and Chat Completions shapes."""

from __future__ import annotations

from mlx_responses.http_facade.chat.from_proto import usage_json
from mlx_responses.http_facade.responses.from_proto import usage_to_json

from mlx_responses.v1 import responses_pb2 as pb


def test_drafts_kept_and_refused_are_in_both_usages() -> None:
    usage = pb.Usage(input_tokens=5, output_tokens=12, draft_tokens=10, accepted_draft_tokens=7)
    details = usage_to_json(usage)["output_tokens_details"]
    assert details["accepted_prediction_tokens"] == 7
    assert details["rejected_prediction_tokens"] == 3
    chat = usage_json([pb.Response(usage=usage), pb.Response(usage=usage)])
    assert chat["completion_tokens_details"]["accepted_prediction_tokens"] == 14
    assert chat["completion_tokens_details"]["rejected_prediction_tokens"] == 6


def test_a_response_that_drafted_nothing_keeps_openais_usage_shape() -> None:
    details = usage_to_json(pb.Usage(input_tokens=5, output_tokens=12))["output_tokens_details"]
    assert details == {"reasoning_tokens": 0}
