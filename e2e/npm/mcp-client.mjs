// mcp-client.mjs drives the facilitator's MCP server with the official
// TypeScript SDK (Client + StreamableHTTPClientTransport): it lists the
// tools and calls each of the four with representative arguments, printing
// one JSON line {serverInfo, tools, calls: {name: result}}.
//
//   node mcp-client.mjs URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { args, emit, fail } from "./lib.mjs";

const [url] = args("mcp-client.mjs URL", 1);

// What each tool is called with, as candidate property names and a value:
// the call uses the names the listed inputSchema declares, so the script
// follows the server's schema instead of guessing it. find_paid_resource
// searches the catalogue; integration_snippet asks for Express.
const wanted = {
  facilitator_status: [],
  settlement_price: [],
  find_paid_resource: [[["query", "q", "search", "keywords", "text"], "echo"]],
  integration_snippet: [[["framework", "name", "stack"], "express"]],
};

/** argsFor builds a tool's arguments from its listed inputSchema. */
function argsFor(tool) {
  const props = tool?.inputSchema?.properties ?? {};
  const a = {};
  for (const [names, value] of wanted[tool?.name] ?? []) {
    // A name the schema lacks is still sent, so the server's validation
    // error shows the mismatch instead of a silently empty call.
    a[names.find((n) => n in props) ?? names[0]] = value;
  }
  return a;
}

const client = new Client({ name: "ardx-e2e", version: "0.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url));
const out = { tools: [], calls: {} };
try {
  await client.connect(transport, { timeout: 30_000 });
  out.serverInfo = client.getServerVersion();
  out.protocolVersion = transport.protocolVersion ?? null;
  const listed = await client.listTools(undefined, { timeout: 30_000 });
  out.tools = listed.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
  for (const name of Object.keys(wanted)) {
    const a = argsFor(listed.tools.find((t) => t.name === name) ?? { name });
    try {
      out.calls[name] = { arguments: a, ...(await client.callTool({ name, arguments: a }, undefined, { timeout: 30_000 })) };
    } catch (err) {
      // A protocol error (unknown tool, invalid arguments) is recorded per
      // call so one bad tool does not hide the others' results.
      out.calls[name] = { arguments: a, protocolError: String(err?.message ?? err) };
    }
  }
  await client.close();
  emit(out);
} catch (err) {
  fail(err, out);
}
