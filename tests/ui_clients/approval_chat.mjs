// Drives the AI SDK's own chat (AbstractChat, DefaultChatTransport) against a live server through one
// tool approval, as useChat does: send a message, answer the tool-approval-request with
// addToolApprovalResponse, and let sendAutomaticallyWhen(lastAssistantMessageIsCompleteWithApprovalResponses)
// send the next request.
//
// stdin: {"url", "text", "approved", "reason"}.
// stdout: {"bodies": [each request's JSON body], "messages": [the chat's UI messages at the end],
//          "requested": [the parts in state approval-requested after the first stream], "errors": [...]}.
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";

class State {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) {
    this.messages = [...this.messages, message];
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class Chat extends AbstractChat {
  constructor(init) {
    const state = new State();
    super({ ...init, state });
    this.chatState = state;
  }
}

const input = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
}));

const bodies = [];
const errors = [];
let finished = 0;
let onFinished = null;
const recordingFetch = async (url, init) => {
  bodies.push(JSON.parse(init.body));
  return fetch(url, init);
};
const chat = new Chat({
  id: "chat-1",
  transport: new DefaultChatTransport({ api: input.url, fetch: recordingFetch }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  onError: (error) => errors.push(String(error)),
  onFinish: () => {
    finished += 1;
    if (onFinished) onFinished();
  },
});

function finishes(count) {
  return new Promise((resolve) => {
    const check = () => {
      if (finished >= count) resolve();
    };
    onFinished = check;
    check();
  });
}

await chat.sendMessage({ text: input.text });
await finishes(1);
const last = chat.chatState.messages.at(-1);
const requested = last.parts.filter((part) => part.state === "approval-requested");
for (const part of requested) {
  await chat.addToolApprovalResponse({ id: part.approval.id, approved: input.approved, reason: input.reason });
}
if (requested.length > 0) await finishes(2);
process.stdout.write(JSON.stringify({ bodies, messages: chat.chatState.messages, requested, errors }));
