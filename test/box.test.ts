import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { resolveBoxSettings } from "../harness/box/config.js";
import { DeviceLock, holderNotePath } from "../harness/box/device-lock.js";
import { configuredSignatures, findEvidence, parseBytes, shippedSignatures } from "../harness/box/evidence.js";
import { BenchError } from "../harness/errors.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";
import { waitFor } from "./helpers/processes.js";

const work = temporaryDirectory("box");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const summaryOf = (runId: string) => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));
const fake = (mode: string) => ["python3", "{bench}/test/helpers/fake_runner.py", mode, "{model}"];
const resetLog = join(work.path, "resets.log");
/** A reset command that records each call (and the box's environment reaching it), and prints what tt-smi would. */
const recordingReset = ["sh", "-c", `echo "reset $QB_TAG" >> ${resetLog}; echo "boards 0,1,2,3 reset"`];
const writeJson = (name: string, value: unknown) => {
  const path = join(work.path, name);
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
  return path;
};

/** A team's own wording of a device OOM, added through the config (the shipped list knows tt-metal's). */
const TEAM_SIGNATURE = {
  name: "team decode allocator", kind: "device_out_of_memory",
  pattern: "failing allocation (?<requested_bytes>[\\d,]+ B) \\(free-at-failure (?<free_bytes>[\\d.]+ MB)/bank\\)",
  fields: { requested_bytes: "bytes", free_bytes: "bytes" },
  summary: ["device out of memory: requested {requested_bytes}", "free {free_bytes} per bank"],
};

test("shipped signatures read tt-metal's own lines into numbers: OOM (both formats), trace-region overflow, TT_FATAL site and message, C assert", () => {
  const signatures = shippedSignatures();
  const oom = findEvidence(
    "2026-05-14 01:00:31.755 | critical |          Always | TT_FATAL: Out of Memory: Not enough space to allocate 3294625792 B DRAM buffer across 12 banks, where each bank needs to store 274686208 B, but bank size is 1071821792 B (allocated: 784847680 B, free: 286974112 B, largest free block: 216504544 B) (assert.hpp:104)",
    signatures);
  assert.equal(oom.map((e) => [e.kind, e.fields]), [["device_out_of_memory", {
    requested_bytes: 3294625792, buffer_type: "DRAM", banks: 12, per_bank_bytes: 274686208, bank_bytes: 1071821792, allocated_bytes: 784847680, free_bytes: 286974112, largest_free_block_bytes: 216504544,
  }]]);
  assert.is(oom[0].summary, "device out of memory: requested 3,294,625,792 B (DRAM, 274,686,208 B per bank of 1,071,821,792 B), free 286,974,112 B per bank, largest free block 216,504,544 B");
  const older = findEvidence("Out of Memory: Not enough space to allocate 117440512 B DRAM buffer across 12 banks, where each bank needs to store 9787392 B, but bank size is only 1046181792 B", signatures);
  assert.is(older[0].summary, "device out of memory: requested 117,440,512 B (DRAM, 9,787,392 B per bank of 1,046,181,792 B)", "no free figures printed: none invented");
  const trace = findEvidence([
    "ERROR 06-05 19:19:37 core.py:1035] RuntimeError: TT_FATAL @ /home/app/tt-metal/tt_metal/distributed/mesh_trace.cpp:78: mesh_cq.device()->get_trace_buffers_size() <= trace_region_size",
    "ERROR 06-05 19:19:37 core.py:1035] info:",
    "ERROR 06-05 19:19:37 core.py:1035] Creating trace buffers of size 60825600B on MeshDevice 0, but only 50000000B is allocated for trace region.",
  ].join("\n"), signatures);
  assert.equal(trace.map((e) => e.kind), ["trace_region_overflow", "fatal_assertion"]);
  assert.equal(trace[0].fields, { demand_bytes: 60825600, device: 0, region_bytes: 50000000 });
  assert.equal(trace[1].fields, { location: "mesh_trace.cpp:78", condition: "mesh_cq.device()->get_trace_buffers_size() <= trace_region_size", message: "Creating trace buffers of size 60825600B on MeshDevice 0, but only 50000000B is allocated for trace region." });
  const cAssert = findEvidence("python3: ../ttnn/cpp/ttnn/operations/matmul/matmul.cpp:1187: void ttnn::operations::matmul::validate(): Assertion `a == b' failed.", signatures);
  assert.equal(cAssert.map((e) => [e.kind, e.summary]), [["fatal_assertion", "assertion failed at matmul.cpp:1187: a == b"]]);
  assert.equal(findEvidence("loading weights ... done\ndecode 16 tokens", signatures), [], "ordinary log lines are no evidence");
  assert.equal([parseBytes("1,073,725,440 B"), parseBytes("12.7 MB"), parseBytes("2 MiB"), parseBytes("lots")], [1073725440, 12700000, 2097152, undefined]);
});

test("a team's signature in the config is checked like the shipped ones: a bad pattern or an untyped group is one line naming the field", () => {
  const file = join(work.path, "team.json");
  assert.equal(findEvidence("failing allocation 1,073,725,440 B (free-at-failure 12.7 MB/bank)", configuredSignatures([TEAM_SIGNATURE], file)).map((e) => e.summary),
    ["device out of memory: requested 1,073,725,440 B, free 12,700,000 B per bank"]);
  const oneLine = (signatures: unknown[]) => {
    try {
      configuredSignatures(signatures, file);
    } catch (error) {
      assert.instance(error, BenchError);
      return (error as BenchError).oneLine();
    }
    return "accepted";
  };
  assert.match(oneLine([{ ...TEAM_SIGNATURE, pattern: "failing (allocation" }]), /team\.json: evidence\.signatures\.0\.pattern: not a regular expression: .* \(fix: write a JavaScript regular expression/);
  assert.match(oneLine([{ ...TEAM_SIGNATURE, fields: { requested_bytes: "bytes" } }]), /evidence\.signatures\.0\.fields: the pattern's group "free_bytes" has no type in fields/);
  assert.match(oneLine([{ ...TEAM_SIGNATURE, summary: "text" }]), /evidence\.signatures\.0\.summary: must be array/);
});

test("bench.config.json is found in the working directory (paths relative to it), flags win over it, and a bad field is exit 2 naming file, field and fix", () => {
  const dir = join(work.path, "box-cwd");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "bench.config.json"), JSON.stringify({ device_lock: { path: "qb.lock" }, reset: { command: ["tt-smi", "-r", "0,1,2,3"] }, leg_timeout_s: 3600, env: { TT_METAL_HOME: "/opt/tt-metal" } }));
  const found = resolveBoxSettings({}, dir);
  assert.equal([found.file, found.lock, found.reset?.command, found.legTimeoutS, found.bootTimeoutS, found.env],
    [join(dir, "bench.config.json"), { path: join(dir, "qb.lock"), timeoutS: 3600 }, ["tt-smi", "-r", "0,1,2,3"], 3600, 600, { TT_METAL_HOME: "/opt/tt-metal" }]);
  const example = resolveBoxSettings({ config: join(PACKAGE_ROOT, "box", "bench.config.example.json") }, dir);
  assert.equal([example.lock?.path, example.reset?.command, example.signatures.length], ["/var/lock/quietbox.lock", ["tt-smi", "-r", "0,1,2,3"], shippedSignatures().length + 1], "the example config docs/quietbox.md shows is valid as shipped");
  const flagged = resolveBoxSettings({ legTimeoutS: 5, lockTimeoutS: 2, resetCommand: ["true"] }, dir);
  assert.equal([flagged.legTimeoutS, flagged.lock?.timeoutS, flagged.reset?.command], [5, 2, ["true"]]);
  assert.is(resolveBoxSettings({}, work.path).lock, undefined, "no config, no flags: no lock");

  const bad = writeJson("bad-box.json", { leg_timeout_s: "1 h" });
  const result = bench(["run", "--suite", "parity16", "--config", bad, "--runs-dir", runs, "--run-id", "bad-config"]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /bad-box\.json: leg_timeout_s: must be integer \(fix: see the schema for the allowed values \(schema: box\/config\.schema\.json\)\)/);
  assert.not.ok(existsSync(join(runs, "bad-config")), "nothing half-written");
  const unknown = bench(["run", "--config", writeJson("typo-box.json", { reset: { comand: ["x"] } }), "--runs-dir", runs]);
  assert.is(unknown.status, 2);
  assert.match(unknown.stderr, /typo-box\.json: reset\.command: required field is missing/);
});

test("a device lock held by another job: bench run says who holds it (pid, command, since) while it waits, then gives up with exit 2 and the reason", async () => {
  const lockPath = join(work.path, "qb.lock");
  const held = await DeviceLock.acquire(lockPath, 5, "bench run --suite nightly (the other job)", () => undefined, new AbortController().signal);
  try {
    const note = JSON.parse(readFileSync(holderNotePath(lockPath), "utf8"));
    const began = Date.now();
    const result = bench(["run", "--suite", "parity16", "--prompt", "4", "--runner", fake("oom").join(" "), "--device-lock", lockPath, "--lock-timeout", "2", "--runs-dir", runs, "--run-id", "lock-timeout"]);
    assert.is(result.status, 2, result.stdout + result.stderr);
    assert.ok(Date.now() - began < 60_000);
    const holder = `pid ${process.pid} on [^ ]+ \\(bench run --suite nightly \\(the other job\\)\\) since ${note.since.replace(/[.]/g, "\\.")}`;
    assert.match(result.stderr, new RegExp(`^waiting for the device lock ${lockPath}: held by ${holder}, for \\d+ s; waited \\d+ s of 2 s$`, "m"), "a line in CI logs, not only a redrawn progress line");
    assert.match(result.stderr, new RegExp(`bench: error: ${lockPath}: device_lock\\.timeout_s: the device lock is still held after waiting 2 s, by ${holder}, for \\d+ s \\(fix: wait for that job to end`));
    const summary = summaryOf("lock-timeout");
    assert.equal([summary.status, summary.exit_code], ["error", 2]);
    assert.match(summary.error, /the device lock is still held after waiting 2 s/);
    assert.equal(summary.verdicts, [], "no device arm ran without the lock");
  } finally {
    await held.release();
  }
  assert.not.ok(existsSync(holderNotePath(lockPath)), "the holder's note goes with the lock");
});

test("a holder killed with -9 releases the lock at once (flock, not a lock file left behind)", async () => {
  const lockPath = join(work.path, "crash.lock");
  const script = `import { DeviceLock } from ${JSON.stringify(join(PACKAGE_ROOT, "dist", "harness", "box", "device-lock.js"))};
    await DeviceLock.acquire(${JSON.stringify(lockPath)}, 5, "doomed holder", () => undefined, new AbortController().signal);
    console.log("locked"); setInterval(() => undefined, 1000);`;
  const holder = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  holder.stdout.on("data", (chunk) => { out += chunk; });
  await waitFor("the holder to take the lock", () => (out.includes("locked") ? true : undefined), 30_000);
  const exited = new Promise((resolve) => holder.once("exit", resolve));
  holder.kill("SIGKILL");
  await exited;
  const began = Date.now();
  const lock = await DeviceLock.acquire(lockPath, 10, "next job", () => undefined, new AbortController().signal);
  assert.ok(Date.now() - began < 5000, `took ${Date.now() - began} ms`);
  await lock.release();
});

test("device legs: each reset before (with the box's env), a hung leg stopped at its timeout then reset, the run goes on; OOM, trace overflow, assert + SIGABRT and a team signature become evidence in summary.json, summary.md, JUnit and the report", () => {
  const parity16 = JSON.parse(readFileSync(join(PACKAGE_ROOT, "suites", "parity16.json"), "utf8"));
  const modes = ["hang", "oom", "trace-overflow", "abort", "team-oom"];
  const suite = writeJson("quietbox-legs.json", {
    ...parity16, $schema: undefined, name: "quietbox-legs", goldens_of: "parity16",
    arms: modes.map((mode) => ({ label: mode, model: "tiny-random:F32", sut: "stdio", command: fake(mode), gate: "required" })),
  });
  const config = writeJson("bench.config.json", {
    device_lock: { path: join(work.path, "legs.lock"), timeout_s: 30 }, reset: { command: recordingReset, timeout_s: 30 }, leg_timeout_s: 5,
    env: { QB_TAG: "qb-7" }, evidence: { signatures: [TEAM_SIGNATURE] },
  });
  writeFileSync(resetLog, "");
  const result = bench(["run", "--suite", suite, "--prompt", "4", "--config", config, "--shutdown-grace", "1", "--runs-dir", runs, "--run-id", "legs"]);
  assert.is(result.status, 2, result.stdout + result.stderr);
  assert.match(result.stdout, /^quietbox-legs +hang +arm +required +ERROR +timed out after 5 s \(leg timeout\); python3 \S+fake_runner\.py hang \S+ was killed by SIGKILL from the harness \(it did not exit when asked\)$/m);
  assert.match(result.stdout, /^quietbox-legs +hang +greedy_parity +required +ERROR +hang: greedy abandoned: timed out after 5 s \(leg timeout\)$/m, "the stopped call is an error, not a rejected answer");
  assert.match(result.stdout, /^quietbox-legs +team-oom +tokenizer +required +PASS/m, "the run went on past the hung arm to the last one");
  assert.is(readFileSync(resetLog, "utf8"), "reset qb-7\n".repeat(7), "five resets before the arms, two after the killed ones (hang, abort)");

  const summary = summaryOf("legs");
  const leg = (arm: string) => summary.legs.find((l: { arm: string }) => l.arm === arm);
  assert.equal(summary.legs.map((l: { arm: string; device: boolean; resets: { when: string }[] }) => [l.arm, l.device, l.resets.map((r) => r.when)]),
    [["hang", true, ["before", "after"]], ["oom", true, ["before"]], ["trace-overflow", true, ["before"]], ["abort", true, ["before", "after"]], ["team-oom", true, ["before"]]]);
  const reset = leg("oom").resets[0];
  assert.equal([reset.command, reset.exit_code, reset.ok, reset.output], [recordingReset, 0, true, ["boards 0,1,2,3 reset"]]);
  assert.type(reset.duration_ms, "number");
  assert.equal(leg("hang").evidence.map((e: { kind: string }) => e.kind), ["timed_out", "killed_by_signal"]);
  assert.equal([leg("hang").timed_out, leg("hang").processes[0].signal, leg("hang").processes[0].forced], [true, "SIGKILL", true]);
  assert.match(readFileSync(join(runs, "legs", leg("hang").stderr_file), "utf8"), /waiting for the device/, "the hung runner's last words are kept");
  assert.equal(leg("oom").evidence[0].fields, { requested_bytes: 1073725440, buffer_type: "DRAM", banks: 12, per_bank_bytes: 89477120, bank_bytes: 1071821792, allocated_bytes: 1059129440, free_bytes: 12692352, largest_free_block_bytes: 6266880 });
  assert.equal(leg("oom").evidence[1].fields.location, "bank_manager.cpp:462");
  assert.equal(leg("trace-overflow").evidence[0].fields, { demand_bytes: 425754624, device: 0, region_bytes: 52428800 });
  assert.equal(leg("abort").evidence.map((e: { kind: string; fields: Record<string, unknown> }) => [e.kind, e.fields.signal ?? e.fields.location]), [["fatal_assertion", "matmul.cpp:1187"], ["killed_by_signal", "SIGABRT"]]);
  assert.is(leg("team-oom").evidence[0].summary, "device out of memory: requested 1,073,725,440 B, free 12,700,000 B per bank");
  assert.equal([summary.box.reset_command, summary.box.leg_timeout_s, summary.box.env, summary.box.lock.path], [recordingReset, 5, ["QB_TAG"], join(work.path, "legs.lock")]);

  const oomLine = "device out of memory: requested 1,073,725,440 B (DRAM, 89,477,120 B per bank of 1,071,821,792 B), free 12,692,352 B per bank, largest free block 6,266,880 B";
  assert.ok(result.stdout.includes(`quietbox-legs / oom: ${oomLine} (stderr: legs/02-quietbox-legs-oom.stderr.log)`), result.stdout);
  assert.ok(readFileSync(join(runs, "legs", "summary.md"), "utf8").includes(`- quietbox-legs / trace-overflow: trace region overflow on device 0: trace buffers need 425,754,624 B, the trace region holds 52,428,800 B`));
  const junit = readFileSync(join(runs, "legs", "junit.xml"), "utf8");
  assert.match(junit, new RegExp(`<error message="the runner exited \\(code 1\\); [^"]*\\[evidence: ${oomLine.replace(/[().,]/g, "\\$&")};`));
  assert.match(junit, /<error message="timed out after 5 s \(leg timeout\); /);
  const report = bench(["report", "legs", "--runs-dir", runs]);
  assert.is(report.status, 0, report.stderr);
  assert.match(report.stdout, /### Box: resets and failure evidence[\s\S]*- quietbox-legs \/ abort: python3 \S+ abort \S+ died of SIGABRT \(not sent by the harness\)/);
  assert.match(readFileSync(join(runs, "legs", "report.html"), "utf8"), /<h3>Box: resets and failure evidence<\/h3><ul><li>quietbox-legs \/ hang: reset before the arm: /);
});

test("a passing device leg: one reset before, none after; a failed reset leaves the arm unrun (ERROR, exit 2)", () => {
  writeFileSync(resetLog, "");
  const reference = ["--suite", "parity16", "--prompt", "4", "--prompt", "5", "--runner", "python3 {bench}/harness/oracle/float64/reference_forward.py {model}"];
  const passed = bench(["run", ...reference, "--config", writeJson("reset-only.json", { reset: { command: recordingReset }, env: { QB_TAG: "pass" } }), "--runs-dir", runs, "--run-id", "reset-pass"]);
  assert.is(passed.status, 0, passed.stdout + passed.stderr);
  assert.is(readFileSync(resetLog, "utf8"), "reset pass\n");
  assert.equal(summaryOf("reset-pass").legs[0].evidence, []);
  const failed = bench(["run", ...reference, "--reset-command", "false", "--runs-dir", runs, "--run-id", "reset-fail"]);
  assert.is(failed.status, 2, failed.stdout + failed.stderr);
  assert.match(failed.stdout, /^parity16 +runner +arm +required +ERROR +not run: the box reset before it failed: false exited 1 after [\d.]+ s/m);
  assert.equal(summaryOf("reset-fail").suts, [], "no runner was started on a board whose reset failed");
});

test.run();
