import type { Command } from "commander";
import { cpuFeatures } from "../../cpu/cpu-identity.js";
import { defaultCpuVariant, probeVariant, shippedCpuVariants } from "../../cpu/forced-variant.js";
import { contrastingVariant, VARIANT_EXTENSIONS } from "../../cpu/variant-features.js";
import { BenchError } from "../../errors.js";
import { progress, say } from "../output.js";
import { cpus } from "node:os";

export function registerCpuVariants(program: Command): void {
  program
    .command("cpu-variants")
    .description("list the ggml CPU libraries llama.cpp ships, which load on this CPU, and the one ggml picks here (force one with --cpu-variant NAME on any bench command, or BENCH_CPU_VARIANT)")
    .option("--contrast", "print only the name of a variant on another instruction set than ggml's pick here (haswell on an AVX-512 CPU, sandybridge on an AVX2 one, else x64): what CI forces for its second pass")
    .action((options: { contrast?: boolean }) => {
      const shipped = shippedCpuVariants();
      if (shipped.length === 0) throw new BenchError("this install has no registered llama.cpp build to list CPU libraries from", { fix: "run node scripts/trust-llama-binary.js (linux-x64 only)" });
      const picked = defaultCpuVariant();
      if (options.contrast === true) {
        say(contrastingVariant(picked));
        return;
      }
      say(`CPU: ${cpus()[0]?.model ?? "unknown"}; extensions: ${cpuFeatures().join(" ") || "none listed"}`);
      for (const variant of shipped) {
        progress(`probing ${variant}`);
        const probe = probeVariant(variant);
        const built = VARIANT_EXTENSIONS[variant]?.join(" ") ?? "not in our table";
        say(`${variant.padEnd(15)} ${(probe.loads ? "loads here" : "cannot load").padEnd(12)} ${built || "baseline (SSE2)"}${variant === picked ? "   ← ggml's pick here" : ""}${probe.loads ? "" : `   (${probe.detail})`}`);
      }
    });
}
