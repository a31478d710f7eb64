// sign-official.mjs signs x402 payments with the OFFICIAL client packages
// and prints the payment payloads they produce, so the Go tier can send
// payments it did not sign itself to two facilitators:
//
//   v2: x402Client (@x402/core/client) with the exact EVM client scheme of
//       @x402/evm, building {x402Version, resource, accepted, payload,
//       extensions} from a PaymentRequired exactly as a paying fetch does;
//   v1: createPaymentHeader of the legacy `x402` package (1.2.0), the code
//       x402-fetch calls, decoded back with its own decodePayment.
//
//   node sign-official.mjs JOBS_FILE
//
// JOBS_FILE is JSON: {"jobs": [{"id", "version", "payerKey", "requirements",
// "resource"?, "clockSkewSeconds"?, "paymentId"?}]}. paymentId (v2) makes
// the merchant's PaymentRequired declare the payment-identifier extension
// with the official @x402/extensions helper, and the client append the id
// with its official helper before signing, as the extension's example
// client does; the output then also carries the id the official extractor
// reads back from the payload. requirements is one v1 or v2
// PaymentRequirements object, signed as given. clockSkewSeconds runs the
// client with its clock moved (Date.now), which is how the tier reaches
// authorizations a real client with a wrong clock would send: an expired
// validBefore, or (v1, whose validAfter is now - 600 s) a validAfter in the
// future. Nothing else about the payload is touched here; broken variants
// that need edits after signing are made by the Go test.
//
// Output, one JSON line: {"payloads": [{"id", "paymentPayload"}]}.
import { readFileSync } from "node:fs";

import { x402Client } from "@x402/core/client";
import {
  PAYMENT_IDENTIFIER,
  appendPaymentIdentifierToExtensions,
  declarePaymentIdentifierExtension,
  extractAndValidatePaymentIdentifier,
} from "@x402/extensions/payment-identifier";
import { toClientEvmSigner } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { createPaymentHeader } from "x402/client";
import { decodePayment } from "x402/schemes";
import { ChainIdToNetwork, EvmNetworkToChainId, NetworkSchema, SupportedEVMNetworks } from "x402/types";
import { privateKeyToAccount } from "viem/accounts";

import { args, emit, fail, hexKey } from "./lib.mjs";

const [jobsFile] = args("sign-official.mjs JOBS_FILE", 1);

/**
 * registerV1Network teaches x402 1.2.0's closed network tables one EVM name
 * (ardx calls chain 1337 "dev" in v1); see pay-echo-v1.mjs for why the legacy
 * package needs it. Signing, encoding and decoding stay the package's code.
 */
function registerV1Network(name, id) {
  if (!NetworkSchema.options.includes(name)) {
    NetworkSchema.options.push(name);
    NetworkSchema._cache?.add(name);
  }
  if (!SupportedEVMNetworks.includes(name)) SupportedEVMNetworks.push(name);
  if (!EvmNetworkToChainId.has(name)) EvmNetworkToChainId.set(name, id);
  if (ChainIdToNetwork[id] === undefined) ChainIdToNetwork[id] = name;
  if (!NetworkSchema.safeParse(name).success) {
    throw new Error(`x402 ${name}: NetworkSchema still rejects it; the legacy package's internals changed`);
  }
}

/** withClock runs fn with Date.now moved by skew seconds. */
async function withClock(skew, fn) {
  if (!skew) return fn();
  const realNow = Date.now;
  Date.now = () => realNow() + skew * 1000;
  try {
    return await fn();
  } finally {
    Date.now = realNow;
  }
}

async function signV2(job, account) {
  const req = job.requirements;
  // Spend controls are off: the harness signs exactly what the job asks,
  // including amounts and assets a cautious wallet would refuse.
  const client = new x402Client()
    .register(req.network, new ExactEvmScheme(toClientEvmSigner(account)))
    .setSpendControls(false);
  const paymentRequired = {
    x402Version: 2,
    resource: job.resource ?? { url: "http://127.0.0.1/parity/resource", description: "parity resource", mimeType: "application/json" },
    accepts: [req],
  };
  if (job.paymentId) {
    paymentRequired.extensions = { [PAYMENT_IDENTIFIER]: declarePaymentIdentifierExtension(false) };
    client.onBeforePaymentCreation(async ({ paymentRequired: pr }) => {
      appendPaymentIdentifierToExtensions(pr.extensions, job.paymentId);
    });
  }
  return client.createPaymentPayload(paymentRequired);
}

async function signV1(job, account) {
  const req = job.requirements;
  const chainId = job.chainId ?? 1337;
  if (!EvmNetworkToChainId.has(req.network)) registerV1Network(req.network, chainId);
  return decodePayment(await createPaymentHeader(account, 1, req));
}

try {
  const { jobs } = JSON.parse(readFileSync(jobsFile, "utf8"));
  const payloads = [];
  for (const job of jobs) {
    const account = privateKeyToAccount(hexKey(job.payerKey));
    const sign = job.version === 1 ? signV1 : signV2;
    const paymentPayload = await withClock(job.clockSkewSeconds, () => sign(job, account));
    const out = { id: job.id, paymentPayload };
    if (job.paymentId) {
      const { id, validation } = extractAndValidatePaymentIdentifier(paymentPayload);
      if (!validation.valid) throw new Error(`payment-identifier: ${validation.errors.join("; ")}`);
      out.paymentId = id;
    }
    payloads.push(out);
  }
  emit({ payloads });
} catch (err) {
  fail(err);
}
