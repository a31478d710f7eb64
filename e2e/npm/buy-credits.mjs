// buy-credits.mjs buys registry credits with the official v2 client:
// @x402/fetch's wrapFetchWithPayment and @x402/evm's exact scheme, on a
// custom chain (geth --dev, chain id CHAIN_ID). It POSTs {"credits": N} to
// URL with the registry key, lets the client answer the 402, and prints
// one JSON line: {status, body, headers, paymentResponse, exchanges, elapsedMs}.
//
//   node buy-credits.mjs URL REGISTRY_KEY CREDITS PAYER_KEY RPC CHAIN_ID ASSET MAX_ATOMIC
import { wrapFetchWithPayment, x402Client, decodePaymentResponseHeader } from "@x402/fetch";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { toClientEvmSigner } from "@x402/evm";
import { createPublicClient, defineChain, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";

import { args, emit, fail, headersOf, hexKey, readBody, recordingFetch } from "./lib.mjs";

const [url, registryKey, credits, payerKey, rpc, chainIdArg, asset, maxAtomic] = args(
  "buy-credits.mjs URL REGISTRY_KEY CREDITS PAYER_KEY RPC CHAIN_ID ASSET MAX_ATOMIC", 8);
const chainId = Number(chainIdArg);
const network = `eip155:${chainId}`;

const chain = defineChain({
  id: chainId,
  name: `geth dev ${chainId}`,
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [rpc] } },
});
const account = privateKeyToAccount(hexKey(payerKey));
const signer = toClientEvmSigner(account, createPublicClient({ chain, transport: http(rpc) }));

// Only this chain and asset, and at most MAX_ATOMIC: a registry asking for
// more, or elsewhere, fails the run.
const client = new x402Client()
  .register(network, new ExactEvmScheme(signer, { rpcUrl: rpc }))
  .setSpendControls({ allowedAssets: [{ network, asset, maxAmountPerPayment: maxAtomic }] })
  .registerPolicy((_, reqs) => reqs.filter((r) => BigInt(r.amount ?? r.maxAmountRequired) <= BigInt(maxAtomic)));
const rec = recordingFetch();
const payFetch = wrapFetchWithPayment(rec.fetch, client);

try {
  const start = performance.now();
  const resp = await payFetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${registryKey}` },
    body: JSON.stringify({ credits: Number(credits) }),
  });
  const body = await readBody(resp);
  const elapsedMs = performance.now() - start;
  const value = resp.headers.get("PAYMENT-RESPONSE");
  emit({
    status: resp.status,
    body,
    headers: headersOf(resp),
    paymentResponse: value ? decodePaymentResponseHeader(value) : null,
    exchanges: rec.exchanges,
    elapsedMs,
    payer: account.address,
  });
} catch (err) {
  fail(err, { exchanges: rec.exchanges });
}
