// Type-checked by `npm run check` (never run): the published types, used as a TypeScript
// program would, against dist/index.d.ts.
import { Agent, Client, IACPError, TimeoutError } from "../dist/index.js";
import type { EventItem, InboxItem, Message, ResponsePayload } from "../dist/index.js";

export async function usage(signal: AbortSignal): Promise<void> {
  const client = new Client({ dataDir: ".data/a", timeout: 10_000 });
  const sent: { message_id: string } = await client.send({ to: "acme:b:bot", intent: "notify", type: "event", payload: { event_type: "x" } });
  const answer: Message = await client.request({ to: "acme:b:bot", intent: "handoff", payload: { task: "t" } }, { wait: 5_000, signal });
  const status: string = (answer.message.payload as ResponsePayload).status;
  for await (const item of client.messages({ signal })) {
    const it: InboxItem = item;
    await client.ack(it.message_id);
  }
  for await (const ev of client.events({ kinds: ["event", "transition"], signal })) {
    const e: EventItem = ev;
    void e.transition?.to;
  }
  const agent = new Agent(client, { unhandled: "refuse" });
  agent.on("handoff", async (msg, { signal: s }) => {
    if (s.aborted) throw new IACPError("INTERNAL_ERROR", "stopping");
    return { status: "accepted", detail: String(msg.message.payload.task) };
  });
  const summary = await agent.run({ signal, maxMessages: 10 });
  try {
    await client.resolve("acme:b:bot");
  } catch (err) {
    if (err instanceof TimeoutError || (err instanceof IACPError && err.code === "AGENT_NOT_FOUND")) return;
    throw err;
  }
  void [sent, status, summary.handled];
}
