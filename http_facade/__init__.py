"""The HTTP façade: OpenAI Responses JSON and SSE in front of the gRPC core."""
