import type { ServerResponse } from "node:http";
import { cpuIdentity } from "../../harness/cpu/cpu-identity.js";
import { allocationsToWire } from "../../harness/sut/allocations-wire.js";
import { sendJson } from "../http-io.js";
import type { RouteContext } from "./route-context.js";

/** What the server says about itself: /v1/models (the artifact, its validation and settings), llama-server's /props, and /allocations. */

/** Answers while booting too (the artifact then null), so a client can record what it is talking to. */
export function models(ctx: RouteContext, res: ServerResponse): void {
  const { options } = ctx;
  const { validation } = options;
  const artifact = ctx.served();
  sendJson(res, 200, {
    object: "list",
    data: [{
      id: options.modelId, object: "model", created: 0, owned_by: "bringup-bench",
      validated: validation.validated, validation_run: validation.run ?? null, validation_note: validation.note,
      capabilities: { token_ids: true, prompt_logprobs: true, tokenize: true, max_logprobs: 20 },
      settings: { ...options.numerics, ...options.cache, ...options.speculation },
      model_file: artifact?.file ?? null, model_sha256: artifact?.sha256 ?? null,
      // Where the numbers are computed: ggml's CPU variants differ in their last digits (docs/findings-cpu.md).
      ggml_cpu: cpuIdentity(),
    }],
  });
}

/** llama-server's /props, the fields about chat: the template in use and the special tokens' texts; `chat_template_origin` (ours) says whether it is the file's. */
export function props(ctx: RouteContext, res: ServerResponse): void {
  const { chat } = ctx.ready();
  sendJson(res, 200, {
    chat_template: chat.source, chat_template_origin: chat.origin, bos_token: chat.specials.bosToken, eos_token: chat.specials.eosToken,
    total_slots: ctx.options.numerics.slots, model_path: ctx.served()?.file ?? null,
  });
}

/**
 * What the engine allocated, by device and by the memory gate's groups, in the runner protocol's
 * `allocations` shape (docs/runner-protocol.md): llama.cpp's buffers as it logged them at boot
 * (model, KV, recurrent state, output and compute), which it holds for the server's life, so steady
 * and peak are the same; and the shape asked (tokens per slot, slots, batch, KV bytes per element).
 */
export function allocations(ctx: RouteContext, res: ServerResponse): void {
  sendJson(res, 200, allocationsToWire(ctx.ready().allocations));
}
