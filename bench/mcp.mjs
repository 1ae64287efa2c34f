// bench/mcp.mjs — the latency of MCP `run_python_code` as an MCP host sees
// it: the official MCP TypeScript SDK client (tests/npm) calls the tool
// RUNS times in a row, after WARMUP calls, and prints one JSON line
// {"mode", "runs", "p50_ms", "p99_ms", "mean_ms"}.
//   node bench/mcp.mjs MODE RUNS WARMUP
// MODE: "stdio" (WARD mcp ARGS..., with WARD_MCP_ARGS) or "http" (the
// daemon's /mcp at WARD_MCP_URL with WARD_API_KEY). WARD_SDK: the SDK's
// dist/esm directory.
import { pathToFileURL } from 'node:url';

const [mode, runs, warmup] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const sdk = process.env.WARD_SDK;
const { Client } = await import(pathToFileURL(`${sdk}/client/index.js`));
let transport;
if (mode === 'stdio') {
	const { StdioClientTransport } = await import(pathToFileURL(`${sdk}/client/stdio.js`));
	transport = new StdioClientTransport({
		command: process.env.WARD,
		args: ['mcp', ...(process.env.WARD_MCP_ARGS || '').split(' ').filter(Boolean)],
		env: { ...process.env }, stderr: 'inherit',
	});
} else {
	const { StreamableHTTPClientTransport } = await import(pathToFileURL(`${sdk}/client/streamableHttp.js`));
	transport = new StreamableHTTPClientTransport(new URL(process.env.WARD_MCP_URL), {
		requestInit: { headers: { Authorization: `Bearer ${process.env.WARD_API_KEY}` } },
	});
}
const client = new Client({ name: 'ward-bench', version: '1.0.0' });
await client.connect(transport);
const ms = [];
for (let i = 0; i < warmup + runs; i++) {
	const t0 = process.hrtime.bigint();
	const r = await client.callTool({ name: 'run_python_code', arguments: { python_code: 'print(1 + 1)' } });
	const dt = Number(process.hrtime.bigint() - t0) / 1e6;
	if (r.isError) {
		console.error(JSON.stringify(r));
		process.exit(1);
	}
	if (i >= warmup)
		ms.push(dt);
}
ms.sort((a, b) => a - b);
const q = (p) => ms[Math.min(ms.length - 1, Math.ceil(p * ms.length) - 1)];
const r1 = (x) => Math.round(x * 10) / 10;
console.log(JSON.stringify({ mode: process.env.BENCH_LABEL || mode, runs, p50_ms: r1(q(0.5)), p99_ms: r1(q(0.99)),
	mean_ms: r1(ms.reduce((a, b) => a + b, 0) / ms.length) }));
await client.close();
process.exit(0);
