import { dirname, resolve } from "node:path";
import { readConversations } from "../../chat/conversations.js";
import { referenceChatTemplate } from "../../chat/reference-template.js";
import { BenchError } from "../../errors.js";
import { resolveModel } from "../../fixtures/registry.js";
import { ggufChatTemplate } from "../../gguf/chat-template.js";
import { readGguf } from "../../gguf/read.js";
import type { ChatTemplateArm, ChatTemplateSuite } from "../../suites/chat-template-suite.js";
import { stopManagedServer, type ManagedServer } from "../../sut/managed-server.js";
import { builtLlamaServer, llamaServerPath } from "../../sut/llama-server-binary.js";
import { LlamaCppTokenizerSut } from "../../sut/llamacpp-tokenizer.js";
import { startServerCommand } from "../../sut/server-command.js";
import { caseTimeoutOf } from "../../sut/with-timeout.js";
import { modelArms, selectIndices } from "../arm-selection.js";
import type { TemplateServer } from "../checks/chat-template/chat-template-arm-state.js";
import { runChatTemplateArm } from "../chat-template-runner.js";
import { openServerArm } from "../open-server-arm.js";
import type { SutContext } from "../open-sut.js";
import type { SuiteKind } from "./kind.js";

/** The suite's conversations, every known difference naming one of them (a typo would silently explain nothing). */
function conversationsOf(suite: ChatTemplateSuite) {
  const conversations = readConversations(resolve(dirname(suite.path), suite.corpus));
  suite.known_differences.forEach((known, i) => {
    if (!conversations.some((c) => c.name === known.conversation)) {
      throw new BenchError(`known difference names no conversation of the corpus: "${known.conversation}"`, { file: suite.path, field: `known_differences[${i}].conversation`, fix: `use one of the names in ${suite.corpus}` });
    }
  });
  return conversations;
}

/**
 * A model file's chat template rendered by our server and by llama-server, each held token for
 * token to the tokenizer_config.json template of the same model rendered by @huggingface/jinja.
 * An arm's leg opens our server (the leg's SUT), the model's tokenizer and, where it is built,
 * llama-server on the same file; without it, llama-server's cells are SKIPPED.
 */
export const chatTemplateKind: SuiteKind<ChatTemplateSuite, ChatTemplateArm> = {
  // A runner is no HTTP server: --runner leaves a chat-template suite nothing to run.
  arms: (suite, options) => (options.runner !== undefined ? [] : modelArms(suite, options)),
  async run(suite, arms, battery) {
    const { options, emit } = battery;
    const corpus = conversationsOf(suite);
    const conversations = selectIndices(corpus.length, options.prompts, "conversation", "--prompt", suite.path).map((index) => ({ ...corpus[index], index }));
    const open = (arm: ChatTemplateArm, context: SutContext) => openServerArm(suite, { label: arm.label, model: arm.model, server: { slots: 1, queue: 1 } }, context, emit);
    await battery.legs(suite, arms, open, async (arm, sut, ours, signal) => {
      const model = await resolveModel(arm.model);
      const tokenizer = await LlamaCppTokenizerSut.open(model.path, arm.label);
      let llamaServer: ManagedServer | undefined;
      try {
        const binary = builtLlamaServer();
        if (binary !== undefined) {
          llamaServer = await startServerCommand([binary, "-m", model.path, "--host", "127.0.0.1", "--port", "{port}", "-t", "1", "-c", "2048", "-np", "1", "--no-webui"],
            { label: `${arm.label} llama-server`, bootTimeoutS: options.box.settings.bootTimeoutS, onProgress: (message) => void emit({ kind: "progress", message }), signal, shutdownGraceS: options.shutdownGraceS });
        }
        const absent: TemplateServer = { absent: `llama-server is not built (${llamaServerPath()}): scripts/build-llama-server.sh builds it` };
        return await runChatTemplateArm({
          suiteName: suite.name, suite, arm, sut, emit, signal, reproduce: battery.reproduce(suite, arm),
          conversations, tokenizer, reference: referenceChatTemplate(arm.reference), fileTemplate: ggufChatTemplate(readGguf(model.path)),
          servers: { server: { baseUrl: ours.baseUrl }, "llama-server": llamaServer === undefined ? absent : { baseUrl: llamaServer.baseUrl } },
          caseTimeout: caseTimeoutOf(suite, options.caseTimeoutS),
        });
      } finally {
        if (llamaServer !== undefined) await stopManagedServer(llamaServer, options.shutdownGraceS);
        await tokenizer.close();
      }
    });
  },
};
