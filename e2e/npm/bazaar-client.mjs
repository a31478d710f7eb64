// bazaar-client.mjs BASE QUERY: the official bazaar client
// (@x402/extensions 2.27.0, withBazaar) lists and searches the catalogue of
// the facilitator at BASE, as a buyer's agent does. Prints one JSON line:
// {list, search, page2, error}.
import { HTTPFacilitatorClient } from "@x402/core/http";
import { withBazaar } from "@x402/extensions/bazaar";

const [base, query] = process.argv.slice(2);
const out = {};
try {
  const client = withBazaar(new HTTPFacilitatorClient({ url: base }));
  out.list = await client.extensions.bazaar.listResources({ type: "http", limit: 10 });
  out.search = await client.extensions.bazaar.search({ query, limit: 1 });
  const cursor = out.search.pagination?.cursor;
  if (cursor) {
    out.page2 = await client.extensions.bazaar.search({ query, limit: 1, cursor });
  }
} catch (e) {
  out.error = String(e?.stack ?? e);
}
console.log(JSON.stringify(out));
