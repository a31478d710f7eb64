// pay-echo-v1.mjs pays GET /echo with the legacy v1 client, x402-fetch
// (x402 1.2.0): the v1 402 body with `accepts`, the X-PAYMENT header and
// X-PAYMENT-RESPONSE. It prints one JSON line like pay-echo-v2.mjs.
//
//   node pay-echo-v1.mjs URL PAYER_KEY RPC CHAIN_ID [V1_NETWORK]
//
// The legacy client knows networks only from closed tables in x402/types
// (the NetworkSchema zod enum, SupportedEVMNetworks, EvmNetworkToChainId,
// ChainIdToNetwork) and has no option for another chain: X402Config carries
// only svmConfig, and createSigner takes only a listed name. A requirement
// naming the facilitator's dev network ("dev", chain 1337) therefore fails
// PaymentRequirementsSchema.parse before anything is signed. registerNetwork
// below adds the one name to those tables in this process, and changes
// nothing else: selection, EIP-712 signing, the header encoding and the
// retry are the package's own code.
import { wrapFetchWithPayment, decodeXPaymentResponse } from "x402-fetch";
import { ChainIdToNetwork, EvmNetworkToChainId, NetworkSchema, SupportedEVMNetworks } from "x402/types";
import { createWalletClient, defineChain, http, publicActions } from "viem";
import { privateKeyToAccount } from "viem/accounts";

import { hexKey, payAndEmit, recordingFetch } from "./lib.mjs";

const argv = process.argv.slice(2);
if (argv.length < 4 || argv.length > 5) {
  process.stderr.write("usage: node pay-echo-v1.mjs URL PAYER_KEY RPC CHAIN_ID [V1_NETWORK]\n");
  process.exit(2);
}
const [url, payerKey, rpc, chainIdArg, v1Network = "dev"] = argv;
const chainId = Number(chainIdArg);

// maxValue caps what the client agrees to pay: 0.01 USDC, ten times the
// echo's price, so a merchant asking for more fails the run.
const maxValue = 10_000n;

/** registerNetwork teaches x402 1.2.0's network tables one EVM name. */
function registerNetwork(name, id) {
  const added = [];
  if (!NetworkSchema.options.includes(name)) {
    NetworkSchema.options.push(name); // the enum's values array; zod builds its lookup set lazily
    NetworkSchema._cache?.add(name);
    added.push("NetworkSchema");
  }
  if (!SupportedEVMNetworks.includes(name)) {
    SupportedEVMNetworks.push(name);
    added.push("SupportedEVMNetworks");
  }
  if (EvmNetworkToChainId.get(name) !== id) {
    EvmNetworkToChainId.set(name, id);
    added.push("EvmNetworkToChainId");
  }
  if (ChainIdToNetwork[id] !== name) {
    ChainIdToNetwork[id] = name;
    added.push("ChainIdToNetwork");
  }
  if (!NetworkSchema.safeParse(name).success) {
    throw new Error(`x402 ${name}: NetworkSchema still rejects it; the legacy package's internals changed`);
  }
  return added;
}

let shim = [];
if (!EvmNetworkToChainId.has(v1Network)) {
  shim = registerNetwork(v1Network, chainId);
}

const chain = defineChain({
  id: chainId,
  name: `geth dev ${chainId}`,
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [rpc] } },
});
const account = privateKeyToAccount(hexKey(payerKey));
// x402 1.2.0 recognises a viem wallet client (chain + transport) as an EVM
// signer and picks the requirement whose network is ChainIdToNetwork[chain.id].
const wallet = createWalletClient({ account, chain, transport: http(rpc) }).extend(publicActions);

const rec = recordingFetch();
const payFetch = wrapFetchWithPayment(rec.fetch, wallet, maxValue);

await payAndEmit(payFetch, rec, url, "X-PAYMENT-RESPONSE", decodeXPaymentResponse, { payer: account.address, networkShim: shim });
