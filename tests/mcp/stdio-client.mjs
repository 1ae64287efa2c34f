// tests/mcp/stdio-client.mjs — drives `ward mcp` with the official MCP
// TypeScript SDK client (tests/npm, pinned) over stdio, one case per run:
//   node stdio-client.mjs CASE
// with WARD (the binary) and WARD_SDK (the SDK's dist/esm directory) in the
// environment. Exits 0 when the case holds, else prints why and exits 1.
import { check, fail, running, sdk, text, until } from './lib.mjs';

const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');

const transport = new StdioClientTransport({
	command: process.env.WARD, args: ['mcp', ...(process.env.WARD_MCP_ARGS || '').split(' ').filter(Boolean)],
	stderr: 'inherit',
});
const client = new Client({ name: 'ward-test', version: '1.0.0' });
await client.connect(transport);
const call = (name, args, opts) => client.callTool({ name, arguments: args }, undefined, opts);

const cases = {
	async init() {
		check(client.getServerVersion()?.name === 'ward', 'serverInfo.name', client.getServerVersion());
		check(client.getServerCapabilities()?.tools, 'the tools capability', client.getServerCapabilities());
		const { tools } = await client.listTools();
		const names = tools.map((t) => t.name).sort();
		check(JSON.stringify(names) === JSON.stringify(['close_session', 'create_session',
			'list_files', 'read_file', 'run_code', 'run_python_code', 'write_file']), 'tool names', names);
		for (const t of tools) {
			const s = t.inputSchema;
			check(s.type === 'object' && s.additionalProperties === false, `${t.name}: closed schema`, s);
			for (const [p, ps] of Object.entries(s.properties))
				check(ps.type && ps.description, `${t.name}.${p}: type and description`, ps);
		}
		const py = tools.find((t) => t.name === 'run_python_code').inputSchema;
		check(JSON.stringify(py.required) === '["python_code"]', 'run_python_code requires python_code', py);
		check(py.properties.global_variables.type === 'object' && py.properties.timeout.type === 'number',
			'run_python_code: global_variables and timeout', py);
		const rc = tools.find((t) => t.name === 'run_code').inputSchema;
		check(JSON.stringify(rc.properties.language.enum) === '["python","bash","node"]', 'language enum', rc);
	},
	async python() {
		const r = await call('run_python_code', { python_code: 'import sys\nprint("out")\nprint("err", file=sys.stderr)\n6 * 7' });
		const t = text(r);
		check(r.isError === false, 'not an error', r);
		check(t.includes('<status>ok</status>') && t.includes('<stdout>\nout\n</stdout>') &&
			t.includes('<stderr>\nerr\n</stderr>') && t.includes('<return_value>\n42\n</return_value>'),
			'stdout, stderr and the value', t);
	},
	async globals() {
		const r = await call('run_python_code', {
			python_code: 'print(name.upper())\nsum(nums) + cfg["k"]',
			global_variables: { name: 'ward', nums: [1, 2, 3], cfg: { k: 10 } },
		});
		check(!r.isError && text(r).includes('WARD') && text(r).includes('<return_value>\n16\n'),
			'globals are set', r);
		const s = await call('create_session', {});
		const sid = JSON.parse(text(s)).session_id;
		const inS = await call('run_python_code', { session_id: sid, python_code: 'x * 2', global_variables: { x: 21 } });
		check(!inS.isError && text(inS).includes('<return_value>\n42\n'), 'globals in a session', inS);
		const bad = await call('run_python_code', { python_code: '1', global_variables: { 'not an id': 1 } });
		check(bad.isError && /parameter: global_variables\.not an id/.test(text(bad)), 'a bad name names the parameter', bad);
	},
	async languages() {
		const b = await call('run_code', { code: 'echo "bash $((6 * 7))"', language: 'bash' });
		check(!b.isError && text(b).includes('bash 42'), 'bash', b);
		const n = await call('run_code', { code: 'console.log("node", 6 * 7)', language: 'node' });
		check(!n.isError && text(n).includes('node 42'), 'node', n);
	},
	async concurrent() {
		const n = 6;
		const rs = await Promise.all([...Array(n).keys()].map((i) => call('run_code', {
			code: `import time\ntime.sleep(0.3)\nprint("call-${i}-" + "x" * ${i})`, language: 'python',
		})));
		rs.forEach((r, i) => {
			const t = text(r);
			check(!r.isError && t.includes(`call-${i}-${'x'.repeat(i)}\n`), `call ${i}: its own output`, t);
			for (let j = 0; j < n; j++)
				check(j === i || !t.includes(`call-${j}-`), `call ${i}: no output of call ${j}`, t);
		});
	},
	async image() {
		const r = await call('run_python_code', { python_code:
			'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()' });
		const imgs = r.content.filter((c) => c.type === 'image');
		check(!r.isError && imgs.length === 1 && imgs[0].mimeType === 'image/png', 'one PNG image', r.content);
		const png = Buffer.from(imgs[0].data, 'base64');
		check(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
			'the image decodes to a PNG', imgs[0].data.slice(0, 40));
	},
	async timeout() {
		const r = await call('run_python_code', { python_code: 'import time\ntime.sleep(30)', timeout: 1 });
		const t = text(r);
		check(r.isError === true && t.includes('<status>timeout</status>') && t.includes('TimeoutError'),
			'a timeout is an error with its name', t);
		check(/hint: /.test(t), 'with a hint', t);
	},
	async exception() {
		let r = await call('run_python_code', { python_code: 'def f():\n    return {}["missing"]\nf()' });
		let t = text(r);
		check(r.isError === true && t.includes('<status>error</status>'), 'isError', r);
		check(t.includes("KeyError: 'missing'"), 'the name and value', t);
		check(t.includes('Traceback') && t.includes('line 2'), 'the traceback', t);
		// an error ward knows more about comes with its hint
		r = await call('run_python_code', { python_code: 'import pandaz' });
		t = text(r);
		check(r.isError === true && t.includes("ModuleNotFoundError: No module named 'pandaz'"), 'the name and value', t);
		check(/hint: module 'pandaz' is not installed in this sandbox's image/.test(t), 'the hint', t);
	},
	async sessions() {
		const s = await call('create_session', { ttl: 60 });
		check(!s.isError, 'create_session', s);
		const sid = JSON.parse(text(s)).session_id;
		check(/^se_[0-9a-f]{16}$/.test(sid), 'a session id', text(s));
		let r = await call('run_python_code', { python_code: 'x = 41', session_id: sid });
		r = await call('run_python_code', { python_code: 'x + 1', session_id: sid });
		check(!r.isError && text(r).includes('<return_value>\n42\n'), 'variables persist', r);
		r = await call('write_file', { session_id: sid, path: 'in/data.txt', content: 'hello\n' });
		check(!r.isError && JSON.parse(text(r)).size === 6, 'write_file', r);
		r = await call('write_file', { session_id: sid, path: 'bin.dat', content: Buffer.from([0, 255, 1]).toString('base64'), encoding: 'base64' });
		check(!r.isError, 'write_file base64', r);
		r = await call('run_code', { code: 'cat /workspace/in/data.txt; echo made > /workspace/out.txt', language: 'bash', session_id: sid });
		check(!r.isError && text(r).includes('hello'), 'the session sees the file', r);
		r = await call('read_file', { session_id: sid, path: 'out.txt' });
		check(!r.isError && r.content[0].text === 'made\n', 'read_file', r);
		r = await call('read_file', { session_id: sid, path: '/workspace/bin.dat' });
		check(!r.isError && r.content[0].type === 'resource' &&
			Buffer.from(r.content[0].resource.blob, 'base64').equals(Buffer.from([0, 255, 1])), 'binary read_file', r);
		const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
		r = await call('write_file', { session_id: sid, path: 'pic.png', content: png.toString('base64'), encoding: 'base64', mode: '0600' });
		check(!r.isError && JSON.parse(text(r)).mode === '0600', 'write_file with a mode', r);
		r = await call('read_file', { session_id: sid, path: 'pic.png' });
		check(!r.isError && r.content[0].type === 'image' && r.content[0].mimeType === 'image/png' &&
			Buffer.from(r.content[0].data, 'base64').equals(png), 'a PNG is read as an image', r);
		r = await call('list_files', { session_id: sid });
		const paths = JSON.parse(text(r)).entries.map((e) => e.path);
		check(['in', 'in/data.txt', 'out.txt', 'bin.dat'].every((p) => paths.includes(p)), 'list_files', paths);
		r = await call('read_file', { session_id: sid, path: '../etc/passwd' });
		check(r.isError && /parameter: path/.test(text(r)), 'a path outside is refused, naming path', r);
		r = await call('close_session', { session_id: sid });
		check(!r.isError, 'close_session', r);
		r = await call('run_python_code', { python_code: '1', session_id: sid });
		check(r.isError && /not_found/.test(text(r)) && /session_id/.test(text(r)), 'a closed session is gone', r);
	},
	async cancel() {
		// a session call: cancelled, it never writes its file
		const s = await call('create_session', {});
		const sid = JSON.parse(text(s)).session_id;
		const ac = new AbortController();
		const p = call('run_python_code', { session_id: sid, python_code:
			'import time\ntime.sleep(2)\nopen("/workspace/late", "w").write("x")' }, { signal: ac.signal });
		await new Promise((r) => setTimeout(r, 500));
		ac.abort();
		await p.then(() => fail('a cancelled call was answered'), () => {});
		// the session takes the next call at once: the cancelled one has ended
		let r;
		await until('the session to be free', async () => {
			r = await call('run_python_code', { session_id: sid, python_code:
				'import time, os\ntime.sleep(2.5)\nos.path.exists("/workspace/late")' });
			return !(r.isError && /session_busy/.test(text(r)));
		});
		check(!r.isError && text(r).includes('<return_value>\nFalse\n'), 'the file was never written', r);
		// a one-shot: its process is killed
		const marker = String(4000000 + Math.floor(Math.random() * 900000));
		const ac2 = new AbortController();
		const q = call('run_code', { language: 'bash', code: `sleep ${marker}` }, { signal: ac2.signal });
		q.catch(() => {});
		await until('the program to run', async () => running(`sleep\0${marker}`));
		ac2.abort();
		await until('the program to be killed', async () => !running(`sleep\0${marker}`));
	},
	async leak() {
		// whatever a program writes to its fd 1, /dev/stdout or /proc/self/fd/1
		// is its own output, never a line of the protocol
		// (writes to every descriptor in the sandbox: tests/mcp/stdio-raw.py leak)
		const code = 'echo one; echo two > /dev/stdout; echo three > /proc/self/fd/1; echo four >&1';
		const r = await call('run_code', { code, language: 'bash' });
		check(!r.isError && ['one', 'two', 'three', 'four'].every((w) => text(r).includes(w)), 'the output', r);
		const p = await call('run_python_code', { python_code:
			'import os\nos.write(1, b"py-one\\n")\nopen("/dev/stdout", "w").write("py-two\\n")\nopen("/proc/self/fd/1", "w").write("py-three\\n")' });
		check(!p.isError && ['py-one', 'py-two', 'py-three'].every((w) => text(p).includes(w)), 'python output', p);
		await client.ping(); // the stream is still whole
	},
};

const name = process.argv[2];
if (!cases[name])
	fail(`no case ${name}`);
await cases[name]();
await client.close();
console.log('ok');
