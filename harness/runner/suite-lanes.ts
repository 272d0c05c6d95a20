import type { RunEvent, RunListener } from "../results/types.js";

/** One suite's share of the battery, as the lanes run it. */
export interface LaneTask {
  /** Nothing else may run beside it (its kind times its legs, or does not say it may share the machine). */
  readonly alone: boolean;
  /** It has a device arm: a board takes one suite's arms at a time, so it never runs beside another such task. */
  readonly device: boolean;
  /** Runs the task, telling what happens to `emit` (which keeps it in task order). */
  run(emit: RunListener): Promise<void>;
}

/**
 * Passes events on in task order: the earliest unfinished task's events go straight through, every
 * later task's are held until each task before it has finished. What the run prints and records
 * is then what a one-at-a-time run would have printed and recorded, in the same order.
 */
class OrderedRelay {
  private readonly held: RunEvent[][];
  private readonly finished: boolean[];
  /** The task whose events pass straight through; -1 while held events are being handed on. */
  private live = 0;

  constructor(count: number, private readonly emit: RunListener) {
    this.held = Array.from({ length: count }, () => []);
    this.finished = Array.from({ length: count }, () => false);
  }

  listenerFor(index: number): RunListener {
    return (event) => (index === this.live ? this.emit(event) : void this.held[index].push(event));
  }

  /** Task `index` has ended: if it was the live one, the tasks after it hand on what they hold, in order, until one still running becomes live. */
  async finish(index: number): Promise<void> {
    this.finished[index] = true;
    if (index !== this.live) return;
    this.live = -1;
    for (let next = index + 1; next < this.held.length; next++) {
      const held = this.held[next];
      // Events the task emits meanwhile join its queue (nothing is live), so they follow the held ones.
      while (held.length > 0) await this.emit(held.shift()!);
      if (!this.finished[next]) {
        this.live = next;
        return;
      }
    }
  }
}

/**
 * Runs tasks up to `lanes` at a time, starting them in order, with their events kept in task order
 * (OrderedRelay). A task that runs alone starts once every earlier task has ended, and no later
 * one starts before it ends; a device task starts once no other device task is running. Once a task has failed or `stopped()` says so, no further task starts;
 * those running finish, and the failure of the earliest failed task is thrown.
 */
export async function runInLanes(tasks: readonly LaneTask[], lanes: number, emit: RunListener, stopped: () => boolean): Promise<void> {
  const relay = new OrderedRelay(tasks.length, emit);
  const failures = new Map<number, unknown>();
  const running = new Map<Promise<void>, LaneTask>();
  const mayStart = () => failures.size === 0 && !stopped();
  const deviceRunning = () => [...running.values()].some((other) => other.device);
  for (const [index, task] of tasks.entries()) {
    if (task.alone) await Promise.all(running.keys());
    while (running.size >= lanes || (task.device && deviceRunning())) await Promise.race(running.keys());
    if (!mayStart()) break;
    const run = (async () => {
      try {
        await task.run(relay.listenerFor(index));
      } catch (error) {
        failures.set(index, error);
      } finally {
        await relay.finish(index);
      }
    })();
    running.set(run, task);
    void run.then(() => running.delete(run), () => running.delete(run));
    if (task.alone) await run;
  }
  await Promise.all(running.keys());
  if (failures.size > 0) throw failures.get(Math.min(...failures.keys()));
}
