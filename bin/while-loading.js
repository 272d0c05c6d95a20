// A Ctrl-C or SIGTERM while bench is still loading must end it the way it ends once running, exit 2
// with one line, not by the signal's default death; the CLI's own handlers
// (harness/cli/exit-code.ts) remove this one when they take over. Shared by bin/bench.js and the
// --cpu-variant preload (harness/cpu/register-forced-variant.ts), which runs before bin/bench.js.
export function endSignalsWhileLoading() {
  const whileLoading = (signal) => {
    process.stderr.write(`bench: stopped by ${signal} while starting (exit 2)\n`);
    process.exit(2);
  };
  whileLoading.benchWhileLoading = true;
  process.on("SIGINT", whileLoading);
  process.on("SIGTERM", whileLoading);
}
