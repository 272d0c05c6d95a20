import { httpCall } from "../../sut/http-call.js";
import { lintPrometheusText } from "../prometheus-lint.js";
import { fail, metrics, pass, type CheckResult, type ConformanceGroup, type ConformanceTarget } from "../target.js";

/** /metrics: Prometheus text with the series the arm expects, named as promtool lints them. */
export const METRICS_CHECKS: ConformanceGroup = {
  async metrics_prometheus(target) {
    const samples = await metrics(target);
    if (samples.size === 0) return fail("/metrics holds no samples");
    const missing = target.expectMetrics.filter((name) => !samples.has(name));
    if (missing.length > 0) return fail(`missing ${missing.join(", ")}`);
    return pass(`${samples.size} samples parse as Prometheus text${target.expectMetrics.length > 0 ? `; all ${target.expectMetrics.length} series the arm expects present` : ""}`);
  },

  metrics_naming: metricsNaming,
};

/** /metrics follows Prometheus's naming rules as `promtool check metrics` lints them. */
async function metricsNaming(target: ConformanceTarget): Promise<CheckResult> {
  const response = await httpCall(`${target.baseUrl}/metrics`, { signal: target.signal });
  if (response.status !== 200) return fail(`/metrics answered ${response.status}`);
  const problems = lintPrometheusText(response.text);
  return problems.length === 0 ? pass("every metric family has help text and promtool's naming (counters _total, gauges not, base units)") : fail(problems.join("; "));
}
