// pay-echo-v2.mjs pays GET /echo with the official v2 client: @x402/fetch's
// wrapFetchWithPayment and @x402/evm's exact scheme, signing for a custom
// chain (geth --dev, chain id CHAIN_ID) as reference §6.5 outlines. It prints
// one JSON line: {status, body, headers, paymentResponse, exchanges, elapsedMs}.
//
//   node pay-echo-v2.mjs URL PAYER_KEY RPC CHAIN_ID [ASSET]
//
// The client's spend controls allow only assets it knows (USDC on listed
// chains); the test token on the dev chain is opted in as ASSET (or, without
// it, any asset), always capped at MAX_ATOMIC.
import { wrapFetchWithPayment, x402Client, decodePaymentResponseHeader } from "@x402/fetch";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { toClientEvmSigner } from "@x402/evm";
import { createPublicClient, defineChain, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";

import { hexKey, payAndEmit, recordingFetch } from "./lib.mjs";

const argv = process.argv.slice(2);
if (argv.length < 4 || argv.length > 5) {
  process.stderr.write("usage: node pay-echo-v2.mjs URL PAYER_KEY RPC CHAIN_ID [ASSET]\n");
  process.exit(2);
}
const [url, payerKey, rpc, chainIdArg, asset] = argv;
const chainId = Number(chainIdArg);
const network = `eip155:${chainId}`;

// MAX_ATOMIC caps what the client agrees to pay: 0.01 USDC at 6 decimals,
// ten times the echo's price, so a merchant asking for more fails the run.
const MAX_ATOMIC = 10_000n;

// The chain is unknown to viem's catalogue, so it is defined here with the
// node's RPC; the public client gives the signer on-chain reads, which the
// scheme uses only for extension enrichment (EIP-3009 signing needs none).
const chain = defineChain({
  id: chainId,
  name: `geth dev ${chainId}`,
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [rpc] } },
});
const account = privateKeyToAccount(hexKey(payerKey));
const publicClient = createPublicClient({ chain, transport: http(rpc) });
const signer = toClientEvmSigner(account, publicClient);

// Registering the exact CAIP-2 id (not "eip155:*") makes the client refuse
// terms for any other chain, so a wrong network in the 402 fails here.
const client = new x402Client()
  .register(network, new ExactEvmScheme(signer, { rpcUrl: rpc }))
  .setSpendControls({
    allowedAssets: asset ? [{ network, asset, maxAmountPerPayment: MAX_ATOMIC.toString() }] : true,
  })
  .registerPolicy((_, reqs) => reqs.filter((r) => BigInt(r.amount ?? r.maxAmountRequired) <= MAX_ATOMIC));
const rec = recordingFetch();
const payFetch = wrapFetchWithPayment(rec.fetch, client);

await payAndEmit(payFetch, rec, url, "PAYMENT-RESPONSE", decodePaymentResponseHeader, { payer: account.address });
