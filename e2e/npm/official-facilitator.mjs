// official-facilitator.mjs runs the official TypeScript x402 facilitator the
// way the x402 project's own e2e facilitator (e2e/facilitators/typescript in
// x402-foundation/x402) runs it: x402Facilitator from @x402/core with the EVM
// exact scheme of @x402/evm registered for one v2 network and, through
// ExactEvmSchemeV1, for every v1 network name, on a viem wallet+public client
// with a nonce manager. It serves the same JSON bodies as ardx on a plain
// node:http server, so the Go tier can send one body to both:
//
//   POST /verify, POST /settle  {x402Version, paymentPayload, paymentRequirements}
//   GET  /supported, GET /health
//
//   node official-facilitator.mjs RPC CHAIN_ID SIGNER_KEY_FILE [V1_NETWORK]
//
// When it listens it prints one JSON line, {url, signer, network, v1Network,
// multicall3Override},
// and serves until SIGTERM or SIGINT. Status codes follow the upstream e2e
// facilitator: 200 with the payment body for every verify or settle outcome,
// 400 {error} when paymentPayload or paymentRequirements is missing (or the
// body is not JSON), 500 {error} when the facilitator throws (no scheme
// registered for the version, scheme or network).
//
// Two deliberate departures from the upstream harness, both plumbing rather
// than facilitator behaviour: its onBeforeSettle hook that refuses a settle
// not preceded by a verify of the same payload is left out (ardx has no such
// rule, and the parity and throughput tests settle without verifying first),
// and the viem client polls every POLL_MS (default 20 ms) instead of viem's
// 4 s default, because geth --dev mines on submission and a 4 s poll would
// measure the poll, not the facilitator.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";

import { x402Facilitator } from "@x402/core/facilitator";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { ExactEvmSchemeV1 } from "@x402/evm/exact/v1/facilitator";
import { EVM_NETWORK_CHAIN_ID_MAP, NETWORKS as EVM_V1_NETWORKS } from "@x402/evm/v1";
import { createWalletClient, defineChain, http, isAddressEqual, nonceManager, publicActions } from "viem";
import { privateKeyToAccount } from "viem/accounts";

import { emit, fail, hexKey } from "./lib.mjs";

const argv = process.argv.slice(2);
if (argv.length < 3 || argv.length > 4) {
  process.stderr.write("usage: node official-facilitator.mjs RPC CHAIN_ID SIGNER_KEY_FILE [V1_NETWORK]\n");
  process.exit(2);
}
const [rpc, chainIdArg, keyFile, v1Network = "dev"] = argv;
const chainId = Number(chainIdArg);
const network = `eip155:${chainId}`;
const pollMs = Number(process.env.POLL_MS ?? 20);

// maxBody bounds a request body as ardx does (64 KiB): the server reads
// nothing larger into memory.
const maxBody = 65_536;

// The v1 mechanism resolves chain ids only through EVM_NETWORK_CHAIN_ID_MAP,
// a closed table without chain 1337; ardx calls 1337 "dev" in v1. Adding the
// one name to the table (and to the NETWORKS list registered below) is the
// whole shim: verification and settlement stay the package's own code.
if (EVM_NETWORK_CHAIN_ID_MAP[v1Network] === undefined) {
  EVM_NETWORK_CHAIN_ID_MAP[v1Network] = chainId;
}
if (!EVM_V1_NETWORKS.includes(v1Network)) {
  EVM_V1_NETWORKS.push(v1Network);
}

const chain = defineChain({
  id: chainId,
  name: `geth dev ${chainId}`,
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [rpc] } },
});

let account;
try {
  account = privateKeyToAccount(hexKey(readFileSync(keyFile, "utf8").split("\n")[0]), { nonceManager });
} catch (err) {
  fail(`signer key file: ${err.message}`);
}

const viemClient = createWalletClient({
  account,
  chain,
  transport: http(rpc, { timeout: 20_000 }),
  pollingInterval: pollMs,
}).extend(publicActions);

// The mechanism diagnoses a failed simulation (nonce used, name or version
// mismatch, balance) with one tryAggregate call to Multicall3 at its
// canonical address, which every public EVM chain has but a fresh geth --dev
// does not: there the diagnosis always fails and every simulation failure
// reads "transaction_simulation_failed". When the chain lacks it, calls to
// that address carry an eth_call state override with Multicall3's runtime
// code, so the official diagnosis runs as it would on Base. The runtime code
// is what viem's own Multicall3 creation code returns when run by eth_call
// (viem ships it for deployless multicalls but does not export it, hence the
// file import). Nothing is written to the chain.
const MULTICALL3 = "0xcA11bde05977b3631167028862bE2a173976CA11";
let multicallOverride;
try {
  const code = await viemClient.getCode({ address: MULTICALL3 });
  if (!code || code === "0x") {
    const { multicall3Bytecode } = await import(new URL("./node_modules/viem/_esm/constants/contracts.js", import.meta.url));
    const { data: runtime } = await viemClient.call({ data: multicall3Bytecode });
    if (!runtime || runtime.length < 1000) throw new Error(`Multicall3 creation code returned ${runtime}`);
    multicallOverride = [{ address: MULTICALL3, code: runtime }];
  }
} catch (err) {
  fail(`Multicall3 on ${rpc}: ${err.message}`);
}

// The signer is built field by field exactly as the upstream e2e facilitator
// builds it (plus the Multicall3 override above), then wrapped by
// toFacilitatorEvmSigner for getAddresses and the receipt timeout.
const evmSigner = toFacilitatorEvmSigner({
  address: account.address,
  readContract: (args) =>
    viemClient.readContract({
      ...args,
      args: args.args || [],
      ...(multicallOverride && isAddressEqual(args.address, MULTICALL3) ? { stateOverride: multicallOverride } : {}),
    }),
  verifyTypedData: (args) => viemClient.verifyTypedData(args),
  writeContract: (args) => viemClient.writeContract({ ...args, args: args.args || [], gas: args.gas }),
  sendTransaction: (args) => viemClient.sendTransaction(args),
  waitForTransactionReceipt: (args) => viemClient.waitForTransactionReceipt(args),
  getCode: (args) => viemClient.getCode(args),
});

const facilitator = new x402Facilitator()
  .register(network, new ExactEvmScheme(evmSigner))
  .registerV1(EVM_V1_NETWORKS, new ExactEvmSchemeV1(evmSigner));

/** send writes a JSON answer, stringifying bigints as decimals. */
function send(res, status, body) {
  const text = JSON.stringify(body, (_, x) => (typeof x === "bigint" ? x.toString() : x));
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

/** readJSON reads a bounded body and parses it; null when it is not JSON. */
async function readJSON(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > maxBody) {
      const err = new Error("body over 65536 bytes");
      err.status = 413;
      throw err;
    }
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return null;
  }
}

/** payment handles POST /verify and POST /settle like the upstream harness. */
async function payment(req, res, op) {
  const body = await readJSON(req);
  const { paymentPayload, paymentRequirements } = body ?? {};
  if (!paymentPayload || !paymentRequirements) {
    return send(res, 400, { error: "Missing paymentPayload or paymentRequirements" });
  }
  try {
    send(res, 200, await facilitator[op](paymentPayload, paymentRequirements));
  } catch (err) {
    send(res, 500, { error: err instanceof Error ? err.message : "Unknown error" });
  }
}

const server = createServer(async (req, res) => {
  try {
    const path = new URL(req.url, "http://x").pathname;
    if (req.method === "POST" && path === "/verify") return await payment(req, res, "verify");
    if (req.method === "POST" && path === "/settle") return await payment(req, res, "settle");
    if (req.method === "GET" && path === "/supported") return send(res, 200, facilitator.getSupported());
    if (req.method === "GET" && path === "/health") return send(res, 200, { status: "ok" });
    send(res, 404, { error: `no route ${req.method} ${path}` });
  } catch (err) {
    if (!res.headersSent) send(res, err.status ?? 500, { error: String(err.message ?? err) });
  }
});
// Timeouts as on every ardx listener: a stuck client cannot hold a socket.
server.headersTimeout = 10_000;
server.requestTimeout = 60_000;
server.keepAliveTimeout = 60_000;

server.listen(0, "127.0.0.1", () => {
  const { port } = server.address();
  emit({ url: `http://127.0.0.1:${port}`, signer: account.address, network, v1Network, multicall3Override: !!multicallOverride });
});

for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 2_000).unref();
  });
}
