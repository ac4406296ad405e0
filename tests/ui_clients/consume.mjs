// Reads encoded streams the way the real clients do and prints what they make of them.
//
// stdin: {"vercel": [{"name", "body"}], "agui": [{"name", "body"}]}, each body an SSE text.
// stdout: {"vercel": {name: {"message", "errors", "extraKeys"}},
//          "agui": {name: {"events", "errors", "messages", "pendingToolCallIds", "clientErrors"}}}.
//
// Vercel: the body goes through the AI SDK's own pipeline, as useChat's transport runs it: the JSON event
// stream parsed and validated by uiMessageChunkSchema, then readUIMessageStream, whose last value is the
// UI message useChat would show. Keys outside the strict (pre-looseObject) schemas are reported too.
// AG-UI: every event is parsed with @ag-ui/core's zod EventSchemas, then the events are run through
// @ag-ui/client's agent (its event verification and its defaultApplyEvents), as a frontend's HttpAgent
// runs them: the messages it builds, and the tool calls it leaves to the client (pendingToolCallIds).
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";
import { EventSchemas } from "@ag-ui/core/schemas";
import { AbstractAgent } from "@ag-ui/client";
import { Observable } from "rxjs";

const common = ["type"];
const strictKeys = {
  start: ["messageId", "messageMetadata"],
  "start-step": [],
  "finish-step": [],
  finish: ["finishReason", "messageMetadata"],
  error: ["errorText"],
  "message-metadata": ["messageMetadata"],
  "text-start": ["id", "providerMetadata"],
  "text-delta": ["id", "delta", "providerMetadata"],
  "text-end": ["id", "providerMetadata"],
  "reasoning-start": ["id", "providerMetadata"],
  "reasoning-delta": ["id", "delta", "providerMetadata"],
  "reasoning-end": ["id", "providerMetadata"],
  "tool-input-start": ["toolCallId", "toolName", "providerExecuted", "providerMetadata", "dynamic"],
  "tool-input-delta": ["toolCallId", "inputTextDelta"],
  "tool-input-available": ["toolCallId", "toolName", "input", "providerExecuted", "providerMetadata", "dynamic"],
  "tool-input-error": [
    "toolCallId", "toolName", "input", "providerExecuted", "providerMetadata", "dynamic", "errorText",
  ],
  "tool-output-available": ["toolCallId", "output", "providerExecuted", "providerMetadata", "dynamic", "preliminary"],
  "tool-output-error": ["toolCallId", "errorText", "providerExecuted", "providerMetadata", "dynamic"],
  "tool-approval-request": ["approvalId", "toolCallId"],
  "tool-output-denied": ["toolCallId"],
};

function bodyStream(text) {
  return new ReadableStream({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(text));
      controller.close();
    },
  });
}

async function consumeVercel(body) {
  const errors = [];
  const extraKeys = [];
  const data = [];
  let finishReason = null;
  const chunks = parseJsonEventStream({ stream: bodyStream(body), schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(result, controller) {
        if (!result.success) {
          errors.push(`schema: ${result.error.message}`);
          return;
        }
        const chunk = result.value;
        if (chunk.type.startsWith("data-")) {
          for (const key of Object.keys(chunk)) {
            if (!["type", "id", "data", "transient"].includes(key)) extraKeys.push(`${chunk.type}.${key}`);
          }
          data.push(chunk);
        } else {
          const allowed = strictKeys[chunk.type];
          if (allowed === undefined) extraKeys.push(`unknown chunk ${chunk.type}`);
          else {
            for (const key of Object.keys(chunk)) {
              if (!common.includes(key) && !allowed.includes(key)) extraKeys.push(`${chunk.type}.${key}`);
            }
          }
        }
        if (chunk.type === "finish") finishReason = chunk.finishReason ?? null;
        controller.enqueue(chunk);
      },
    }),
  );
  let message = null;
  try {
    for await (const value of readUIMessageStream({ stream: chunks, onError: (e) => errors.push(`client: ${e.message ?? e}`) })) {
      message = value;
    }
  } catch (e) {
    errors.push(`reader: ${e.message ?? e}`);
  }
  return { message: message && JSON.parse(JSON.stringify(message)), errors, extraKeys, data, finishReason };
}

class ReplayAgent extends AbstractAgent {
  constructor(events) {
    super({ threadId: "streamfold" });
    this.events = events;
  }

  run() {
    return new Observable((subscriber) => {
      for (const event of this.events) subscriber.next(event);
      subscriber.complete();
    });
  }
}

async function applyAgui(events) {
  const clientErrors = [];
  let pendingToolCallIds = null;
  let messages = null;
  const warn = console.warn;
  console.warn = (...args) => clientErrors.push(`warn: ${args.join(" ")}`);
  try {
    const result = await new ReplayAgent(events).runAgent(
      { runId: "streamfold" },
      { onRunFinishedEvent: (params) => { pendingToolCallIds = params.pendingToolCallIds ?? null; } },
    );
    messages = result.newMessages;
  } catch (e) {
    clientErrors.push(`agent: ${e.message ?? e}`);
  } finally {
    console.warn = warn;
  }
  return { messages, pendingToolCallIds, clientErrors };
}

async function consumeAgui(body) {
  const errors = [];
  const events = [];
  for (const block of body.split("\n\n")) {
    if (!block.trim()) continue;
    const line = block.split("\n").find((l) => l.startsWith("data: "));
    if (line === undefined) {
      errors.push(`not a data frame: ${block}`);
      continue;
    }
    const event = JSON.parse(line.slice(6));
    const parsed = EventSchemas.safeParse(event);
    if (!parsed.success) errors.push(`${event.type}: ${parsed.error.message}`);
    events.push(event);
  }
  return { events, errors, ...(await applyAgui(events)) };
}

let input = "";
for await (const piece of process.stdin) input += piece;
const request = JSON.parse(input);
const out = { vercel: {}, agui: {} };
for (const { name, body } of request.vercel ?? []) out.vercel[name] = await consumeVercel(body);
for (const { name, body } of request.agui ?? []) out.agui[name] = await consumeAgui(body);
process.stdout.write(JSON.stringify(out));
