// tests/mcp/http-client.mjs — drives a daemon's /mcp with the official MCP
// TypeScript SDK client (tests/npm, pinned) over StreamableHTTPClientTransport,
// one case per run:
//   node http-client.mjs CASE
// with WARD_SDK (the SDK's dist/esm directory), WARD_MCP_URL (the daemon's
// http://127.0.0.1:PORT/mcp) and WARD_API_KEY (the key to use; WARD_OTHER_KEY
// a second key of the same tenant) in the environment. Exits 0 when the case
// holds, else prints why and exits 1.
import { check, fail, running, sdk, text, until } from './lib.mjs';

const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');

const url = new URL(process.env.WARD_MCP_URL);
const key = process.env.WARD_API_KEY;

function marker() {
	return String(4000000 + Math.floor(Math.random() * 900000));
}

async function connect(k = key) {
	const transport = new StreamableHTTPClientTransport(url, {
		requestInit: { headers: { Authorization: `Bearer ${k}` } },
	});
	const client = new Client({ name: 'ward-test', version: '1.0.0' });
	await client.connect(transport);
	return { client, transport };
}
// One raw POST of a JSON-RPC message on a session: [status, body text].
async function post(sid, msg, k = key, extra = {}) {
	const r = await fetch(url, {
		method: 'POST',
		headers: { Authorization: `Bearer ${k}`, 'Content-Type': 'application/json',
			Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': sid, ...extra },
		body: JSON.stringify(msg),
	});
	return [r.status, await r.text()];
}

const cases = {
	async basic() {
		const { client, transport } = await connect();
		check(client.getServerVersion()?.name === 'ward', 'serverInfo.name', client.getServerVersion());
		check(/^[0-9a-f]{64}$/.test(transport.sessionId || ''), 'an Mcp-Session-Id of 32 random bytes', transport.sessionId);
		check(transport.protocolVersion === '2025-11-25', 'the protocol version agreed', transport.protocolVersion);
		const { tools } = await client.listTools();
		const names = tools.map((t) => t.name).sort();
		check(JSON.stringify(names) === JSON.stringify(['close_session', 'create_session',
			'list_files', 'read_file', 'run_code', 'run_python_code', 'write_file']), 'tool names', names);
		const r = await client.callTool({ name: 'run_python_code', arguments: { python_code: 'print("hello from /mcp")\n6 * 7' } });
		check(!r.isError && text(r).includes('hello from /mcp') && text(r).includes('42'), 'stdout and the value', r);
		const g = await client.callTool({ name: 'run_python_code',
			arguments: { python_code: 'print(a + b)', global_variables: { a: 40, b: 2 } } });
		check(!g.isError && text(g).includes('42'), 'global_variables', g);
		await client.ping();
		await transport.terminateSession();
		await client.close();
	},
	async concurrent() {
		const { client } = await connect();
		const n = 6;
		const calls = [];
		for (let i = 0; i < n; i++)
			calls.push(client.callTool({ name: 'run_python_code',
				arguments: { python_code: `import time\ntime.sleep(0.3)\nprint("call-${i}-out")` } }));
		const rs = await Promise.all(calls);
		rs.forEach((r, i) => {
			const t = text(r);
			check(!r.isError && t.includes(`call-${i}-out`), `call ${i} has its own output`, r);
			for (let j = 0; j < n; j++)
				check(j === i || !t.includes(`call-${j}-out`), `call ${i} has no output of call ${j}`, r);
		});
		await client.close();
	},
	async chart() {
		const { client } = await connect();
		const code = 'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n' +
			'plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()';
		const r = await client.callTool({ name: 'run_python_code', arguments: { python_code: code } });
		const img = r.content.find((c) => c.type === 'image');
		check(!r.isError && img && img.mimeType === 'image/png', 'an ImageContent', r);
		check(Buffer.from(img.data, 'base64').subarray(0, 8).toString('hex') === '89504e470d0a1a0a', 'a PNG', img.data.slice(0, 40));
		await client.close();
	},
	async timeout() {
		const { client } = await connect();
		const r = await client.callTool({ name: 'run_python_code',
			arguments: { python_code: 'import time\ntime.sleep(30)', timeout: 1 } });
		check(r.isError === true && /timeout/i.test(text(r)), 'a timeout is isError', r);
		await client.close();
	},
	async sessions() {
		const { client } = await connect();
		const c = await client.callTool({ name: 'create_session', arguments: {} });
		let sid = c.structuredContent?.session_id;
		try { sid = sid || JSON.parse(text(c)).session_id; } catch {}
		check(!c.isError && sid, 'create_session gives a session_id', c);
		let r = await client.callTool({ name: 'run_python_code', arguments: { python_code: 'x = 41', session_id: sid } });
		check(!r.isError, 'a call in the session', r);
		r = await client.callTool({ name: 'run_python_code', arguments: { python_code: 'x + 1', session_id: sid } });
		check(!r.isError && text(r).includes('42'), 'the session keeps x', r);
		r = await client.callTool({ name: 'write_file', arguments: { session_id: sid, path: 'note.txt', content: 'kept' } });
		check(!r.isError, 'write_file', r);
		r = await client.callTool({ name: 'read_file', arguments: { session_id: sid, path: 'note.txt' } });
		check(!r.isError && text(r).includes('kept'), 'read_file', r);
		r = await client.callTool({ name: 'close_session', arguments: { session_id: sid } });
		check(!r.isError, 'close_session', r);
		await client.close();
	},
	async nosessions() {
		// a key with execute and not sessions: the session tools are refused
		const { client } = await connect();
		const r = await client.callTool({ name: 'create_session', arguments: {} }).catch((e) => ({ thrown: String(e) }));
		check(r.isError === true || r.thrown, 'create_session refused', r);
		check(/sessions/.test(r.thrown || text(r)), 'the refusal names the sessions scope', r);
		const ok = await client.callTool({ name: 'run_python_code', arguments: { python_code: 'print(1)' } });
		check(!ok.isError, 'run_python_code still works', ok);
		await client.close();
	},
	async cancel() {
		// notifications/cancelled (the SDK sends it on abort) kills the execution
		const { client } = await connect();
		const m = marker();
		const ac = new AbortController();
		const q = client.callTool({ name: 'run_code', arguments: { language: 'bash', code: `sleep ${m}` } },
			undefined, { signal: ac.signal });
		q.catch(() => {});
		await until('the program to run', async () => running(`sleep\0${m}`));
		ac.abort();
		await until('the program to be killed', async () => !running(`sleep\0${m}`));
		await client.close();
	},
	async hangup() {
		// a client that closes its connection cancels its request
		const { client, transport } = await connect();
		const m = marker();
		const ac = new AbortController();
		const p = fetch(url, {
			method: 'POST', signal: ac.signal,
			headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json',
				Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': transport.sessionId },
			body: JSON.stringify({ jsonrpc: '2.0', id: 'raw-1', method: 'tools/call',
				params: { name: 'run_code', arguments: { language: 'bash', code: `sleep ${m}` } } }),
		});
		p.catch(() => {});
		await until('the program to run', async () => running(`sleep\0${m}`));
		ac.abort();
		await until('the program to be killed', async () => !running(`sleep\0${m}`));
		await client.close();
	},
	async cancelraw() {
		// the POST of a request its client cancelled ends (202, no body):
		// the core sends no response for it, and the connection is not held
		const { client, transport } = await connect();
		const m = marker();
		const p = fetch(url, {
			method: 'POST',
			headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json',
				Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': transport.sessionId },
			body: JSON.stringify({ jsonrpc: '2.0', id: 'raw-2', method: 'tools/call',
				params: { name: 'run_code', arguments: { language: 'bash', code: `sleep ${m}` } } }),
		});
		await until('the program to run', async () => running(`sleep\0${m}`));
		const [st] = await post(transport.sessionId, { jsonrpc: '2.0', method: 'notifications/cancelled',
			params: { requestId: 'raw-2', reason: 'test' } });
		check(st === 202, 'the notification is accepted', st);
		const r = await Promise.race([p, new Promise((res) => setTimeout(() => res(null), 10000))]);
		check(r && r.status === 202 && (await r.text()) === '', 'the cancelled POST ends with 202', r && r.status);
		await until('the program to be killed', async () => !running(`sleep\0${m}`));
		await client.close();
	},
	async dupid() {
		// a second request with the id of one in flight is refused (-32600)
		const { client, transport } = await connect();
		const m = marker();
		const call = { jsonrpc: '2.0', id: 'dup', method: 'tools/call',
			params: { name: 'run_code', arguments: { language: 'bash', code: `sleep ${m}` } } };
		const p = post(transport.sessionId, call);
		p.catch(() => {});
		await until('the program to run', async () => running(`sleep\0${m}`));
		const [st, body] = await post(transport.sessionId, call);
		check(st === 400 && JSON.parse(body).error.code === -32600 && JSON.parse(body).id === 'dup',
			'the same id again is 400 -32600', [st, body]);
		await post(transport.sessionId, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'dup' } });
		const [st1] = await p;
		check(st1 === 202, 'the first ends when cancelled', st1);
		await until('the program to be killed', async () => !running(`sleep\0${m}`));
		await client.close();
	},
	async deleted() {
		// DELETE ends the session, and kills what it runs
		const { client, transport } = await connect();
		const sid = transport.sessionId;
		const m = marker();
		const q = client.callTool({ name: 'run_code', arguments: { language: 'bash', code: `sleep ${m}` } });
		q.catch(() => {});
		await until('the program to run', async () => running(`sleep\0${m}`));
		await transport.terminateSession();
		await until('the program to be killed', async () => !running(`sleep\0${m}`));
		const [st, body] = await post(sid, { jsonrpc: '2.0', id: 1, method: 'ping' });
		check(st === 404, 'an ended session is 404', [st, body]);
		await client.close();
	},
	async otherkey() {
		// a session belongs to the key that made it: another key of the same
		// tenant gets 404, as for an unknown id
		const { client, transport } = await connect();
		const sid = transport.sessionId;
		const other = process.env.WARD_OTHER_KEY;
		let [st, body] = await post(sid, { jsonrpc: '2.0', id: 1, method: 'ping' }, other);
		check(st === 404, 'another key is 404', [st, body]);
		[st, body] = await post(sid, { jsonrpc: '2.0', id: 2, method: 'ping' });
		check(st === 200 && JSON.parse(body).result, 'the owner still is served', [st, body]);
		[st, body] = await post('0'.repeat(64), { jsonrpc: '2.0', id: 3, method: 'ping' });
		check(st === 404, 'an unknown id is 404', [st, body]);
		const del = await fetch(url, { method: 'DELETE', headers: { Authorization: `Bearer ${other}`, 'Mcp-Session-Id': sid } });
		check(del.status === 404, 'another key cannot end it', del.status);
		await client.close();
	},
	async refused() {
		// the SDK's connect fails on a refusal (WARD_EXPECT: the status)
		try {
			await connect();
		} catch (e) {
			check(String(e.code) === process.env.WARD_EXPECT, `refused with ${process.env.WARD_EXPECT}`, [e.code, String(e)]);
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
