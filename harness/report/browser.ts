import { chromium, type Browser } from "playwright-core";

/** Debian's chromium, started the way this closed network needs (no background connections). */
export const CHROMIUM_PATH = process.env.BENCH_CHROMIUM ?? "/usr/bin/chromium";

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

export interface RenderCheck {
  readonly chartsRendered: number;
  readonly canvases: number;
  /** Canvases with at least one non-blank pixel. */
  readonly paintedCanvases: number;
  /** Charts with at least one data point (axes alone paint a canvas too). */
  readonly chartsWithData: number;
  readonly consoleErrors: readonly string[];
}

/** Opens a report page, waits for its charts, checks each canvas has drawn something, and screenshots it. */
export async function checkReportInBrowser(htmlPath: string, screenshotPath: string): Promise<RenderCheck> {
  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const consoleErrors: string[] = [];
    page.on("console", (message) => { if (message.type() === "error") consoleErrors.push(message.text()); });
    page.on("pageerror", (error) => consoleErrors.push(error.message));
    await page.goto(`file://${htmlPath}`);
    await page.waitForFunction(() => (window as unknown as { benchChartsRendered?: number }).benchChartsRendered !== undefined, undefined, { timeout: 15_000 });
    const result = await page.evaluate(() => {
      const canvases = [...document.querySelectorAll("canvas")];
      const painted = canvases.filter((canvas) => {
        const context = canvas.getContext("2d");
        if (context === null || canvas.width === 0 || canvas.height === 0) return false;
        const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
        for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) return true;
        return false;
      });
      type ChartOnPage = { data: { datasets: { data: unknown[] }[] } };
      const chartOf = (window as unknown as { Chart: { getChart(canvas: HTMLCanvasElement): ChartOnPage | undefined } }).Chart.getChart;
      const withData = canvases.filter((canvas) => chartOf(canvas)?.data.datasets.some((d) => d.data.some((point) => point !== null && point !== undefined)) === true);
      return { chartsRendered: (window as unknown as { benchChartsRendered: number }).benchChartsRendered, canvases: canvases.length, paintedCanvases: painted.length, chartsWithData: withData.length };
    });
    await page.screenshot({ path: screenshotPath, fullPage: true });
    return { ...result, consoleErrors };
  } finally {
    await browser.close();
  }
}
