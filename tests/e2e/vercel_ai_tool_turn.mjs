// The Vercel AI SDK (`ai` + `@ai-sdk/openai`) runs a multi-step tool turn after reasoning
// against the server at BASE_URL; prints what each step saw and what each request sent, as JSON.
// Run by tests/e2e/test_vercel_ai.py with NODE_PATH pointing at the project-local .tools.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, isStepCount, tool } from "ai";
import { z } from "zod";

const requests = [];
// The bundled model thinks when its chat template is asked to: a body field no SDK knows.
async function thinkingFetch(url, init) {
  const body = JSON.parse(init.body);
  body.chat_template_kwargs = { enable_thinking: true };
  requests.push(body);
  const reply = await fetch(url, { ...init, body: JSON.stringify(body) });
  if (!reply.ok) {
    requests[requests.length - 1].error = await reply.clone().text();
  }
  return reply;
}

const openai = createOpenAI({
  baseURL: process.env.BASE_URL,
  apiKey: "x",
  fetch: thinkingFetch,
});

const result = await generateText({
  model: openai.responses(process.env.MODEL),
  prompt: "Use the get_weather tool with city set to paris.",
  tools: {
    get_weather: tool({
      description: "Current weather of a city.",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => (city === "paris" ? "sunny" : "unknown"),
    }),
  },
  stopWhen: isStepCount(3),
  maxOutputTokens: 96,
  providerOptions: { openai: { forceReasoning: true, reasoningSummary: "auto" } },
});

console.log(
  JSON.stringify({
    text: result.text,
    steps: result.steps.map((step) => ({
      reasoningText: step.reasoningText ?? "",
      toolCalls: step.toolCalls.map((c) => ({ name: c.toolName, input: c.input })),
      toolResults: step.toolResults.map((r) => r.output),
      text: step.text,
      finishReason: step.finishReason,
    })),
    requests: requests.map((r) => ({
      input: r.input,
      reasoning: r.reasoning ?? null,
      store: r.store ?? null,
      error: r.error ?? null,
    })),
  }),
);
