import { runCheckModule } from "./checks/check-module.js";
import type { ChatTemplateArmContext, ChatTemplateArmState } from "./checks/chat-template/chat-template-arm-state.js";
import { checksOf } from "./checks/registry.js";

/** A chat-template arm (checks/registry.ts): our server, then llama-server, each held to the reference. */
export async function runChatTemplateArm(context: ChatTemplateArmContext): Promise<{ summaryLine: string | undefined }> {
  const state: ChatTemplateArmState = { context };
  for (const check of checksOf("chat-template")) await runCheckModule(context, check, state);
  return { summaryLine: undefined };
}
