/** The gateway's `/metrics`, as `name{labels}` → value for every `acp_…` sample. */
export async function scrapeMetrics(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    const match = /^(acp_\S+) (\S+)$/.exec(line);
    if (match) samples.set(match[1] as string, Number(match[2]));
  }
  return samples;
}
