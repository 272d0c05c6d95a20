"""Runs scripts/runners/hf_oracle.py where transformers is installed but Node (and so `bench`) is not:
asks it, over the runner protocol, exactly what `bench run` asks on a parity suite, records every
answer as a session file (scripts/runners/recorded_session.py's format), and compares the answers
with the family's llama.cpp goldens in numpy, for a first reading on the spot. Back on a machine
with `bench`, the session file is scored by the harness itself:

  bench run --suite zoo --arm "qwen35 F32" --runner "python3 {bench}/scripts/runners/recorded_session.py replay SESSION.jsonl"
  (parity16 for tiny-random; an arm of zoo for the other families: each is held to its own goldens)

Usage: python3 hf_oracle_check.py --runners DIR --suite SUITE.json --out DIR [--prompts 4,5] [--timeout-s S] FAMILY_DIR...
  FAMILY_DIR holds model.gguf (its vocabulary tokenizes), hf/ (from `bench fixtures export-hf`) and
  goldens/ (the fixture's committed goldens: manifest.json and the .npy files).
One family's failure (a load error, a crash, a timeout) is recorded in the summary; the others still run.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np

# The determinism check re-asks teacher forcing with this k (harness/runner/parity-runner.ts).
DETERMINISM_K = 5
STDERR_LINES_KEPT = 40


def golden_arrays(goldens_dir, prompts):
    manifest = json.load(open(os.path.join(goldens_dir, "manifest.json"), encoding="utf-8"))
    load = lambda name: np.load(os.path.join(goldens_dir, name))
    chosen = prompts if prompts is not None else list(range(manifest["prompts"]["count"]))
    padded = load("prompt_ids.npy")
    return {
        "T": int(manifest["T"]), "K": int(manifest["K"]), "prompts": chosen,
        "prompt_ids": [[int(t) for t in padded[p] if t >= 0] for p in chosen],
        "greedy_ids": load("greedy_ids.npy")[chosen], "topk_ids": load("topk_ids.npy")[chosen], "topk_logprobs": load("topk_logprobs.npy")[chosen],
    }


def parity_requests(texts, golden):
    """The requests `bench run` sends a runner on a parity suite, in its order, when every answer comes back:
    tokenizer, greedy, teacher forcing (K), determinism (2 more greedy, 2 teacher forcings at k 5), batch
    invariance, trace demand. A change there shows as "no answer recorded" in the replay, never as a pass."""
    greedy = {"requests": [{"prompt_ids": ids, "max_tokens": golden["T"]} for ids in golden["prompt_ids"]]}
    forced = lambda k: {"requests": [{"prompt_ids": ids, "continuation_ids": [int(t) for t in golden["greedy_ids"][i]], "k": k} for i, ids in enumerate(golden["prompt_ids"])]}
    return [("tokenize", {"texts": texts}), ("greedy", greedy), ("teacher_forced_top_k", forced(golden["K"])),
            ("greedy", greedy), ("greedy", greedy), ("teacher_forced_top_k", forced(DETERMINISM_K)), ("teacher_forced_top_k", forced(DETERMINISM_K)),
            ("batched_greedy", greedy), ("trace_demand", {})]


def compare(golden, answers):
    """A numpy first reading: greedy ids against the goldens', and teacher-forced log-probs on the ids both top-K lists hold."""
    reading = {}
    greedy = [a for m, a in answers if m == "greedy" and "result" in a]
    if greedy:
        ids = greedy[0]["result"]["ids"]
        wanted = [row.tolist() for row in golden["greedy_ids"]]
        first_divergence = {str(p): next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                            for p, got, want in zip(golden["prompts"], ids, wanted) if got != want}
        reading["greedy_exact"] = f"{len(ids) - len(first_divergence)}/{len(ids)}"
        reading["greedy_first_divergence"] = first_divergence
        reading["greedy_reruns_identical"] = all(g["result"]["ids"] == ids for g in greedy[1:])
    forced = [a for m, a in answers if m == "teacher_forced_top_k" and "result" in a]
    if forced:
        rows = forced[0]["result"]["top_k"]
        deltas, top1_same, positions = [], 0, 0
        for i, prompt_rows in enumerate(rows):
            for j, row in enumerate(prompt_rows):
                positions += 1
                want_ids, want_lp = golden["topk_ids"][i][j].tolist(), golden["topk_logprobs"][i][j]
                top1_same += row["ids"][0] == want_ids[0]
                mine = dict(zip(row["ids"], row["logprobs"]))
                deltas += [abs(mine[t] - float(want_lp[n])) for n, t in enumerate(want_ids) if t in mine]
        reading["teacher_forced_top1_agreement"] = f"{top1_same}/{positions}"
        reading["teacher_forced_max_abs_delta_logprob_mnats"] = round(1000 * max(deltas), 3) if deltas else None
        reading["teacher_forced_mean_abs_delta_logprob_mnats"] = round(1000 * float(np.mean(deltas)), 4) if deltas else None
    errors = [f"{m}: {a['error'].get('message')}" for m, a in answers if "error" in a]
    if errors:
        reading["request_errors"] = errors[:5]
    return reading


def config_probe(hf_dir):
    """The config keys we wrote that transformers' config class does not define: it keeps them as plain
    attributes and the model may never read them (a silently ignored key shows here, not as an error)."""
    try:
        import transformers
        written = json.load(open(os.path.join(hf_dir, "config.json"), encoding="utf-8"))
        config = transformers.AutoConfig.from_pretrained(hf_dir)
        defined = set(type(config)().to_dict())
        return {"config_class": type(config).__name__, "keys_unknown_to_config_class": sorted(set(written) - defined)}
    except Exception as error:  # a probe: its failure is recorded, the check goes on
        return {"config_probe_error": f"{type(error).__name__}: {error}"}


def run_family(family_dir, probe, runners, texts, prompts, out_dir, timeout_s):
    name = os.path.basename(os.path.normpath(family_dir))
    summary = {"family": name, **probe}
    started = time.monotonic()
    stderr_lines = []
    try:
        golden = golden_arrays(os.path.join(family_dir, "goldens"), prompts)
        chosen_texts = [texts[p] for p in golden["prompts"]]
        command = [sys.executable, os.path.join(runners, "hf_oracle.py"), os.path.join(family_dir, "model.gguf"), os.path.join(family_dir, "hf"), "--dtype", "float64"]
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        threading.Thread(target=lambda: [stderr_lines.append(line.rstrip()) for line in child.stderr], daemon=True).start()
        killer = threading.Timer(timeout_s, child.kill)
        killer.start()
        answers = []
        with open(os.path.join(out_dir, f"{name}.session.jsonl"), "w", encoding="utf-8") as session:
            hello = json.loads(child.stdout.readline() or "null")
            if hello is None:
                raise RuntimeError("hf_oracle.py exited before its hello")
            session.write(json.dumps({"hello": hello}) + "\n")
            summary["engine"] = hello.get("engine")
            if "error" in hello:
                summary["load_error"] = hello["error"]
            else:
                for request_id, (method, params) in enumerate(parity_requests(chosen_texts, golden), 1):
                    child.stdin.write(json.dumps({"id": request_id, "method": method, "params": params}) + "\n")
                    child.stdin.flush()
                    line = child.stdout.readline()
                    if not line:
                        raise RuntimeError(f"hf_oracle.py ended during {method} (killed after {timeout_s} s, or crashed: see stderr_tail)")
                    answer = {k: v for k, v in json.loads(line).items() if k in ("result", "error")}
                    answers.append((method, answer))
                    session.write(json.dumps({"request": {"method": method, "params": params}, "answer": answer}) + "\n")
                    session.flush()
                    summary.setdefault("seconds_per_request", []).append([method, round(time.monotonic() - started, 2)])
                child.stdin.write(json.dumps({"id": 0, "method": "shutdown", "params": {}}) + "\n")
                child.stdin.flush()
        child.wait(timeout=30)
        killer.cancel()
        summary.update(compare(golden, answers))
    except Exception as error:  # one family's failure is a finding, never the end of the check
        summary["error"] = f"{type(error).__name__}: {error}"
    summary["seconds"] = round(time.monotonic() - started, 2)
    summary["stderr_tail"] = stderr_lines[-STDERR_LINES_KEPT:]
    return summary


def main(argv):
    parser = argparse.ArgumentParser(prog="hf_oracle_check.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runners", required=True, help="the folder holding hf_oracle.py")
    parser.add_argument("--suite", required=True, help="the parity suite whose prompts the goldens were made from")
    parser.add_argument("--out", required=True)
    parser.add_argument("--prompts", help="only these prompt indices, comma-separated (the harness's --prompt)")
    parser.add_argument("--timeout-s", type=float, default=240, help="per family")
    parser.add_argument("families", nargs="+")
    args = parser.parse_args(argv)
    texts = json.load(open(args.suite, encoding="utf-8"))["prompts"]
    prompts = [int(p) for p in args.prompts.split(",")] if args.prompts else None
    os.makedirs(args.out, exist_ok=True)
    summaries = [None] * len(args.families)
    # transformers imports its classes lazily, and not safely from several threads at once: probe first, one by one.
    probes = [config_probe(os.path.join(family, "hf")) for family in args.families]

    def one(i, family):
        summaries[i] = run_family(family, probes[i], args.runners, texts, prompts, args.out, args.timeout_s)

    threads = [threading.Thread(target=one, args=(i, f)) for i, f in enumerate(args.families)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summaries, f, indent=1)
    lines = []
    for s in summaries:
        verdict = s.get("load_error") or s.get("error") or (f"every answer an error, first: {s['request_errors'][0]}" if "greedy_exact" not in s and s.get("request_errors") else None) or f"greedy exact {s.get('greedy_exact')}, teacher-forced top-1 {s.get('teacher_forced_top1_agreement')}, max |Δ log p| {s.get('teacher_forced_max_abs_delta_logprob_mnats')} mnats"
        lines.append(f"{s['family']}: {verdict} ({s['seconds']} s)")
    with open(os.path.join(args.out, "summary.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
