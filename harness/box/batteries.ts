import { dirname, join, resolve } from "node:path";
import { parseModelReference } from "../fixtures/registry.js";
import { assertMatchesInlineSchema, assertMatchesSchema, readJsonFile } from "../io/json-schema.js";
import { PACKAGE_ROOT } from "../paths.js";
import { DEFAULT_BATTERY } from "../suites/default-battery.js";
import { loadSuite, suiteArgument, type Suite } from "../suites/load.js";

const SHIPPED_BATTERIES_FILE = join(PACKAGE_ROOT, "box", "batteries.json");
const BATTERIES_SCHEMA = join(PACKAGE_ROOT, "box", "batteries.schema.json");

/** One entry of box/batteries.json or of bench.config.json `batteries`. */
interface BatteryEntry {
  readonly models: readonly string[];
  readonly suites: readonly string[];
  readonly why?: string;
}

/** A team's batteries as its config lists them (`batteries` in bench.config.json), not yet checked. */
export interface ConfiguredBatteries {
  readonly file: string;
  readonly entries: readonly unknown[];
}

/** The suites that validate one model for `bench serve`, and the file that says so. */
export interface ValidationBattery {
  readonly suites: readonly Suite[];
  readonly configuredIn: string;
  /** The command that runs the whole battery (what a refusal's fix names). */
  readonly command: string;
  /** Whether some suite of the battery has a required arm on the model: without one, no run of it can validate the model. */
  readonly gatesTheModel: boolean;
}

/**
 * A model as `bench serve --model` and suite arms name it, comparable across spellings: a fixture
 * by name and quant (`qwen35-tiny` is `qwen35-tiny:F32`), a file by its absolute path.
 */
function modelKey(reference: string, base: string): string {
  const parsed = parseModelReference(reference);
  return parsed.kind === "file" ? resolve(base, parsed.path) : `${parsed.fixture}:${parsed.quant}`;
}

/** A suite a batteries file names: a built-in suite by name, a suite file relative to the batteries file. */
function suiteIn(reference: string, base: string): Suite {
  return loadSuite(reference.endsWith(".json") ? resolve(base, reference) : reference);
}

function entriesOf(batteries: ConfiguredBatteries | undefined): { file: string; entries: readonly BatteryEntry[] }[] {
  const shipped = assertMatchesSchema<{ batteries: BatteryEntry[] }>(readJsonFile(SHIPPED_BATTERIES_FILE), BATTERIES_SCHEMA, SHIPPED_BATTERIES_FILE);
  const sources = [{ file: SHIPPED_BATTERIES_FILE, entries: shipped.batteries }];
  if (batteries === undefined) return sources;
  const schema = () => readJsonFile(BATTERIES_SCHEMA) as object;
  const team = assertMatchesInlineSchema<{ batteries: BatteryEntry[] }>({ batteries: batteries.entries }, BATTERIES_SCHEMA, schema, batteries.file, "", "schema: box/batteries.schema.json");
  return [{ file: batteries.file, entries: team.batteries }, ...sources];
}

/** How a user runs exactly these suites, unsubsetted: `bench run` for the default battery. */
function batteryCommand(suites: readonly Suite[]): string {
  const names = suites.map(suiteArgument);
  const isDefault = names.length === DEFAULT_BATTERY.length && DEFAULT_BATTERY.every((name, i) => names[i] === name);
  return isDefault ? "bench run" : `bench run ${names.map((name) => `--suite ${name}`).join(" ")}`;
}

/**
 * Which battery validates `model` for `bench serve`: the first entry naming it, the team's config
 * first, then box/batteries.json (the built-in fixtures). Undefined: no battery is configured for it,
 * so nothing can validate it.
 */
export function validationBattery(model: string, configured?: ConfiguredBatteries, cwd = process.cwd()): ValidationBattery | undefined {
  const key = modelKey(model, cwd);
  for (const { file, entries } of entriesOf(configured)) {
    const entry = entries.find((candidate) => candidate.models.some((listed) => modelKey(listed, dirname(file)) === key));
    if (entry === undefined) continue;
    const suites = entry.suites.map((reference) => suiteIn(reference, dirname(file)));
    const gatesTheModel = suites.some((suite) => suite.arms.some((arm) => arm.gate === "required" && "model" in arm && typeof arm.model === "string" && modelKey(arm.model, cwd) === key));
    return { suites, configuredIn: file, command: batteryCommand(suites), gatesTheModel };
  }
  return undefined;
}

/** What a refusal to serve tells the user to do: a command that can pass, or the configuration it lacks. */
export function validationFix(battery: ValidationBattery | undefined): string {
  if (battery === undefined) return `name the suites that validate it in bench.config.json "batteries" (docs/serving-validated.md), run them with bench run`;
  if (!battery.gatesTheModel) return `its battery in ${battery.configuredIn} has no required arm on this model: add one to a suite of it (docs/serving-validated.md), then \`${battery.command}\``;
  return `validate it with \`${battery.command}\``;
}
