"""OpenAI Responses: /v1/responses, its WebSocket mode and the Conversations API."""
