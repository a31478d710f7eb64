// Shared helpers of the e2e client scripts: argument checks, a fetch that
// records every exchange (so the Go test can see the 402 then the paid
// retry), and one JSON line of output on stdout.

/** args returns the positional arguments or exits 2 with the usage line. */
export function args(usage, n) {
  const a = process.argv.slice(2);
  if (a.length !== n) {
    process.stderr.write(`usage: node ${usage}\n`);
    process.exit(2);
  }
  return a;
}

/** hexKey returns a private key as viem wants it: 0x-prefixed hex. */
export function hexKey(k) {
  k = k.trim();
  return k.startsWith("0x") ? k : `0x${k}`;
}

/**
 * recordingFetch wraps fetch so every request the payment client makes is
 * recorded: method, URL, which payment headers it sent and the status. A
 * timeout bounds each exchange so a hung server fails the script, not the
 * whole tier.
 */
export function recordingFetch(timeoutMs = 60_000) {
  const exchanges = [];
  const f = async (input, init) => {
    const req = new Request(input, init);
    const sent = {};
    for (const h of ["PAYMENT-SIGNATURE", "X-PAYMENT"]) {
      if (req.headers.has(h)) sent[h] = true;
    }
    const resp = await fetch(req, { signal: AbortSignal.timeout(timeoutMs) });
    exchanges.push({ method: req.method, url: req.url, sent, status: resp.status });
    return resp;
  };
  return { fetch: f, exchanges };
}

/** headersOf returns the response headers as a plain object. */
export function headersOf(resp) {
  return Object.fromEntries(resp.headers.entries());
}

/** readBody returns the body as JSON when it parses, else as text. */
export async function readBody(resp) {
  const text = await resp.text();
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** emit prints one JSON line: the script's whole result. */
export function emit(v) {
  process.stdout.write(JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x)) + "\n");
}

/** fail prints the error as a JSON line and exits 1. */
export function fail(err, extra = {}) {
  emit({ error: String(err?.stack ?? err), ...extra });
  process.exit(1);
}

/**
 * payAndEmit GETs url through a paying fetch, times it from request to
 * answer, decodes the settlement header (named header, decoded by decode)
 * and emits the result with extra; any error is emitted through fail.
 */
export async function payAndEmit(payFetch, rec, url, header, decode, extra) {
  try {
    const start = performance.now();
    const resp = await payFetch(url, { method: "GET" });
    const body = await readBody(resp);
    const elapsedMs = performance.now() - start;
    const value = resp.headers.get(header);
    emit({
      ...extra,
      status: resp.status,
      body,
      headers: headersOf(resp),
      paymentResponse: value ? decode(value) : null,
      exchanges: rec.exchanges,
      elapsedMs,
    });
  } catch (err) {
    fail(err, { ...extra, exchanges: rec.exchanges });
  }
}
