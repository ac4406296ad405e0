// Drives @ag-ui/client's HttpAgent against a live server through one tool approval interrupt: a run
// that finishes with an interrupt outcome (agent.pendingInterrupts), then a run resumed with the answer.
//
// stdin: {"url", "text", "status": "resolved" | "cancelled", "payload"}.
// stdout: {"bodies": [each request's RunAgentInput], "interrupts": [the first run's pendingInterrupts],
//          "messages": [agent.messages at the end], "pendingAfter": [pendingInterrupts at the end]}.
import { HttpAgent } from "@ag-ui/client";

const input = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
}));

const bodies = [];
const agent = new HttpAgent({
  url: input.url,
  threadId: "thread-1",
  initialMessages: [{ id: "user-1", role: "user", content: input.text }],
  fetch: async (url, init) => {
    bodies.push(JSON.parse(init.body));
    return fetch(url, init);
  },
});

await agent.runAgent({ runId: "run-1" });
const interrupts = agent.pendingInterrupts;
const resume = interrupts.map((interrupt) => ({
  interruptId: interrupt.id,
  status: input.status,
  ...(input.status === "resolved" ? { payload: input.payload } : {}),
}));
await agent.runAgent({ runId: "run-2", resume });
process.stdout.write(
  JSON.stringify({ bodies, interrupts, messages: agent.messages, pendingAfter: agent.pendingInterrupts }),
);
