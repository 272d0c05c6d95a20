import { existsSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";

/**
 * Linux /proc, read for the process and port bookkeeping that chaos runs and tests check: which
 * processes a run started, and which TCP ports they listen on. Entries can vanish mid-read; such a
 * process is simply not listed.
 */
export interface ProcessEntry {
  readonly ppid: number;
  readonly cmdline: string;
}

/** Every live (not zombie) process: pid → parent pid and command line. */
export function processTable(): Map<number, ProcessEntry> {
  const table = new Map<number, ProcessEntry>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The command name (field 2) may hold spaces: split after its ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (state === "Z") continue;
      table.set(Number(entry), { ppid: Number(ppid), cmdline: readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim() });
    } catch {
      // Gone while we looked.
    }
  }
  return table;
}

/**
 * User + system CPU seconds a process has used (/proc/<pid>/stat fields 14 and 15, clock ticks of
 * 1/100 s); with `withReapedChildren`, also its waited-for children's (fields 16 and 17), so a child
 * that has exited still counts. 0 for a process that is gone.
 */
export function cpuSeconds(pid: number, withReapedChildren = false): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12]) + (withReapedChildren ? Number(fields[13]) + Number(fields[14]) : 0)) / 100;
  } catch {
    return 0;
  }
}

/** A live process's peak resident memory so far (/proc/<pid>/status VmHWM), in bytes; undefined when it is gone or /proc does not say. */
export function peakResidentBytes(pid: number): number | undefined {
  try {
    const kib = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
    return kib === undefined ? undefined : Number(kib) * 1024;
  } catch {
    return undefined;
  }
}

/**
 * Starts a process's peak resident memory over from its present size (writing 5 to
 * /proc/<pid>/clear_refs, Linux ≥ 4.0), so the next peakResidentBytes is the peak of what ran since:
 * one load point's, not the largest of every point before it. False where the kernel refused.
 */
export function resetPeakResident(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

/** Children, grandchildren and so on of `root`. */
export function descendants(root: number, table = processTable()): number[] {
  const found: number[] = [];
  const frontier = [root];
  while (frontier.length > 0) {
    const parent = frontier.pop()!;
    for (const [pid, info] of table) if (info.ppid === parent && !found.includes(pid)) { found.push(pid); frontier.push(pid); }
  }
  return found;
}

/** TCP ports in LISTEN state (IPv4 and IPv6), by socket inode. */
export function listeningPortsByInode(): Map<string, number> {
  const ports = new Map<string, number>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== "0A") continue;
      ports.set(fields[9], parseInt(fields[1].split(":")[1], 16));
    }
  }
  return ports;
}

/** The TCP ports `pid` listens on. */
export function portsListenedBy(pid: number, listening = listeningPortsByInode()): number[] {
  const ports: number[] = [];
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      const port = inode === undefined ? undefined : listening.get(inode);
      if (port !== undefined) ports.push(port);
    }
  } catch {
    // Gone while we looked.
  }
  return ports;
}
