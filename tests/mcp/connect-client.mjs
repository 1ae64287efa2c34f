// tests/mcp/connect-client.mjs — drives `ward mcp --connect URL` (a stdio
// relay to a daemon's /mcp) with the official MCP TypeScript SDK's stdio
// client, one case per run:
//   node connect-client.mjs CASE
// with WARD (the binary), WARD_SDK (the SDK's dist/esm directory),
// WARD_CONNECT (the URL), WARD_API_KEY and (reopen) WARD_AUDIT, the
// daemon's audit log, in the environment. Exits 0 when
// the case holds, else prints why and exits 1.
import { readFileSync } from 'node:fs';
import { check, fail, sdk, text } from './lib.mjs';

const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');

const transport = new StdioClientTransport({
	command: process.env.WARD, args: ['mcp', '--connect', process.env.WARD_CONNECT],
	env: { WARD_API_KEY: process.env.WARD_API_KEY, PATH: process.env.PATH },
	stderr: 'inherit',
});
const client = new Client({ name: 'ward-test', version: '1.0.0' });

const cases = {
	async basic() {
		await client.connect(transport);
		check(client.getServerVersion()?.name === 'ward', 'serverInfo.name', client.getServerVersion());
		const { tools } = await client.listTools();
		check(tools.some((t) => t.name === 'run_python_code'), 'run_python_code is listed', tools.map((t) => t.name));
		const n = 4;
		const calls = [];
		for (let i = 0; i < n; i++)
			calls.push(client.callTool({ name: 'run_python_code',
				arguments: { python_code: `import time\ntime.sleep(0.3)\nprint("relay-${i}-out")` } }));
		const rs = await Promise.all(calls);
		rs.forEach((r, i) => {
			check(!r.isError && text(r).includes(`relay-${i}-out`), `call ${i} has its own output`, r);
			for (let j = 0; j < n; j++)
				check(j === i || !text(r).includes(`relay-${j}-out`), `call ${i} has no output of call ${j}`, r);
		});
		const t = await client.callTool({ name: 'run_python_code',
			arguments: { python_code: 'import time\ntime.sleep(30)', timeout: 1 } });
		check(t.isError === true, 'a timeout is isError', t);
		await client.ping();
		// stdin's end: the relay exits promptly (its session is ended)
		const pid = transport.pid;
		const t0 = Date.now();
		await client.close();
		const gone = () => { try { process.kill(pid, 0); return false; } catch { return true; } };
		while (!gone()) {
			if (Date.now() - t0 > 5000)
				fail('the relay is still running 5 s after stdin closed');
			await new Promise((r) => setTimeout(r, 20));
		}
	},
	async reopen() {
		// the daemon ends the session while the host is idle (mcp-session-idle):
		// the relay opens a new one and sends the request again in it
		await client.connect(transport);
		let r = await client.callTool({ name: 'run_python_code', arguments: { python_code: 'print("before")' } });
		check(!r.isError && text(r).includes('before'), 'a call', r);
		const audit = process.env.WARD_AUDIT;
		// this key's session, by its id (wk_ID_SECRET)
		const kid = process.env.WARD_API_KEY.split('_')[1];
		const expired = () => readFileSync(audit, 'utf8').split('\n').filter((l) =>
			l.includes('"mcp.session.expired"') && l.includes(`"key_id":"${kid}"`)).length;
		const n0 = expired();
		const end = Date.now() + 20000;
		while (expired() === n0) {
			if (Date.now() > end)
				fail('the session never expired');
			await new Promise((res) => setTimeout(res, 50));
		}
		r = await client.callTool({ name: 'run_python_code', arguments: { python_code: 'print("after")' } });
		check(!r.isError && text(r).includes('after'), 'a call after the session expired', r);
		await client.close();
	},
	async refused() {
		// a wrong key: initialize fails with the daemon's 401 as a JSON-RPC error
		try {
			await client.connect(transport);
		} catch (e) {
			check(/401/.test(String(e)) && /API key/.test(String(e)), 'the 401 in the error', String(e));
			return;
		}
		fail('connected');
	},
};

const name = process.argv[2];
if (!cases[name])
	fail(`no case '${name}'`);
await cases[name]();
console.log('ok');
process.exit(0);
