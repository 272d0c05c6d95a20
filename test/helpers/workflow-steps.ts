import { readFileSync } from "node:fs";

/** One step of a workflow job: a shell line (`run`) or an action (`uses`, with its `with` text), and its `if`. */
export interface WorkflowStep {
  readonly run?: string;
  readonly uses?: string;
  readonly with?: string;
  readonly if?: string;
}

export interface Workflow {
  readonly env: Readonly<Record<string, string>>;
  readonly jobs: Readonly<Record<string, readonly WorkflowStep[]>>;
}

/**
 * The steps of docs/ci/quietbox.yml, read line by line. It reads only the shape that file has
 * (top-level env, jobs, steps whose keys are one-line scalars) and throws on any other step line,
 * so a change to the workflow cannot silently drop a step from the test that executes it.
 */
export function readWorkflowSteps(path: string): Workflow {
  const env: Record<string, string> = {};
  const jobs: Record<string, WorkflowStep[]> = {};
  let section: "env" | "jobs" | undefined;
  let job: string | undefined;
  let inSteps = false;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
    const top = /^(\w[\w-]*):/.exec(line);
    if (top !== null) {
      section = top[1] === "env" ? "env" : top[1] === "jobs" ? "jobs" : undefined;
      continue;
    }
    if (section === "env") {
      const entry = /^ {2}(\w+): (.*)$/.exec(line);
      if (entry === null) throw new Error(`${path}: unexpected env line ${JSON.stringify(line)}`);
      env[entry[1]] = entry[2];
    } else if (section === "jobs") {
      const jobName = /^ {2}([\w-]+):$/.exec(line);
      if (jobName !== null) {
        job = jobName[1];
        jobs[job] = [];
        inSteps = false;
        continue;
      }
      if (/^ {4}steps:$/.test(line)) { inSteps = true; continue; }
      if (/^ {4}\S/.test(line)) { inSteps = false; continue; }
      if (!inSteps || job === undefined) continue;
      const key = /^ {6}(- | {2})(run|uses|with|if): (.*)$/.exec(line);
      if (key === null) throw new Error(`${path}: unexpected step line ${JSON.stringify(line)}`);
      if (key[1] === "- ") jobs[job].push({});
      const steps = jobs[job];
      steps[steps.length - 1] = { ...steps[steps.length - 1], [key[2]]: key[3] };
    }
  }
  return { env, jobs };
}
