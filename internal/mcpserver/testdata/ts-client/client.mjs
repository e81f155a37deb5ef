// An agent developer's TypeScript MCP client, as the docs would show it:
// connect to Harbormaster's streamable HTTP endpoint with the agent's bearer
// token, list the tools, run one statement inside the delegation and one
// outside it, and print what came back as one JSON object on stdout.
//
//   node client.mjs http://127.0.0.1:8080/mcp hm_TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
if (!url || !token) {
  console.error("usage: node client.mjs URL TOKEN");
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "harbormaster-ts-e2e", version: "0.0.0" });
await client.connect(transport);

const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  return {
    isError: r.isError ?? false,
    text: r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n"),
    structured: r.structuredContent ?? null,
  };
};

const { tools } = await client.listTools();
const out = {
  server: client.getServerVersion(),
  tools: tools.map((t) => ({ name: t.name, description: t.description, hasOutputSchema: !!t.outputSchema })),
  executed: await call("run_sql", { target: "shop", sql: "SELECT id, status FROM orders WHERE id = 3" }),
  referred: await call("run_sql", { target: "shop", sql: "SELECT id, total_cents FROM orders WHERE id = 3" }),
};
out.status = await call("request_status", { request_id: out.referred.structured?.request_id ?? "", wait_seconds: 0 });
console.log(JSON.stringify(out));
await client.close();
