'use strict';
// Tests of the Node kernel, driven over its JSON-lines protocol (runners/PROTOCOL.md).
// Run: node --test runners/node/

const { test } = require('node:test');
const assert = require('node:assert');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const DIR = __dirname;
const TERMINAL = new Set(['execute_reply', 'call_reply', 'shutdown_reply']);

class Kernel {
  // via: 'sh' (kernel.sh, as the supervisor starts it) or 'node' (node kernel.js directly)
  constructor({ config = {}, via = 'sh' } = {}) {
    this.cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'ward-node-test-'));
    const cmd = via === 'sh' ? ['/bin/sh', [path.join(DIR, 'kernel.sh')]] : [process.execPath, [path.join(DIR, 'kernel.js')]];
    this.proc = spawn(cmd[0], cmd[1], {
      cwd: this.cwd,
      env: { ...process.env, WARD_KERNEL_CONFIG: JSON.stringify(config) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.messages = [];
    this.waiters = [];
    this.raw = [];
    this.stderr = '';
    let buf = '';
    this.proc.stdout.setEncoding('utf8');
    this.proc.stdout.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        let m;
        try {
          m = JSON.parse(line);
        } catch (e) {
          this.raw.push(line);
          continue;
        }
        this.messages.push(m);
        this.wake();
      }
    });
    this.proc.stderr.on('data', (d) => (this.stderr += d));
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal })));
    this.n = 0;
  }

  wake() {
    for (const w of this.waiters.splice(0)) w();
  }

  async waitFor(pred, ms = 10000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const i = this.messages.findIndex(pred);
      if (i >= 0) return this.messages.splice(i, 1)[0];
      if (Date.now() > deadline) throw new Error(`timed out; stderr: ${this.stderr}; have: ${JSON.stringify(this.messages)}`);
      await new Promise((r) => {
        this.waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }

  async ready() {
    return this.waitFor((m) => m.msg_type === 'status');
  }

  sendLine(line) {
    this.proc.stdin.write(line + '\n');
  }

  // Sends a request; resolves to the list of messages answering it, the terminal one last.
  async request(msgType, content) {
    const id = `r${++this.n}`;
    this.sendLine(JSON.stringify({ msg_type: msgType, id, content }));
    const out = [];
    for (;;) {
      const m = await this.waitFor((x) => x.parent_id === id);
      out.push(m);
      if (TERMINAL.has(m.msg_type)) return out;
    }
  }

  exec(code, extra = {}) {
    return this.request('execute_request', { code, stop_on_error: false, ...extra });
  }

  async close() {
    this.proc.stdin.end();
    return this.exited;
  }

  // after each test, pass or fail: no kernel outlives it
  cleanup() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    fs.rmSync(this.cwd, { recursive: true, force: true });
  }
}

function start(t, opts) {
  const k = new Kernel(opts);
  t.after(() => k.cleanup());
  return k;
}

const of = (msgs, type) => msgs.filter((m) => m.msg_type === type);
const stdout = (msgs) => of(msgs, 'stream').filter((m) => m.content.name === 'stdout').map((m) => m.content.text).join('');
const result = (msgs) => {
  const r = of(msgs, 'execute_result');
  return r.length ? r[0].content.data : undefined;
};
const reply = (msgs) => msgs[msgs.length - 1];
// stream text as [name, text] runs (the kernel may join consecutive text of one stream)
const runs = (msgs) => {
  const out = [];
  for (const m of of(msgs, 'stream')) {
    const last = out[out.length - 1];
    if (last && last[0] === m.content.name) last[1] += m.content.text;
    else out.push([m.content.name, m.content.text]);
  }
  return out;
};

test('status, persistence, values', async (t) => {
  const k = start(t);
  const st = await k.ready();
  assert.strictEqual(st.content.execution_state, 'idle');
  assert.strictEqual(st.content.language, 'node');
  assert.strictEqual(typeof st.time, 'number');

  let r = await k.exec('var a = 1\nlet b = 2\nconst c = {x: [1, 2]}\nfunction f(n) { return n * 10 }');
  assert.strictEqual(reply(r).content.status, 'ok');
  assert.strictEqual(result(r), undefined, 'declarations have no value');

  r = await k.exec('a + b + f(c.x[1])');
  assert.deepStrictEqual(result(r), { 'text/plain': '23' });
  assert.strictEqual(reply(r).content.execution_count, 2);

  // the same const again in a later cell (a rerun) works
  r = await k.exec('const c = {x: [5]}; c');
  assert.deepStrictEqual(result(r), { 'text/plain': '{ x: [ 5 ] }', 'application/json': { x: [5] } });

  r = await k.exec('class Point { constructor(x) { this.x = x } }\nnew Point(3)');
  assert.strictEqual(result(r)['text/plain'], 'Point { x: 3 }');
  assert.ok(!('application/json' in result(r)), 'class instances are not plain JSON');
  r = await k.exec('new Point(4).x');
  assert.strictEqual(result(r)['text/plain'], '4');

  r = await k.exec('undefined');
  assert.strictEqual(result(r), undefined);
  r = await k.exec("'s'");
  assert.strictEqual(result(r)['text/plain'], "'s'");
  r = await k.exec('Promise.resolve(7)');
  assert.strictEqual(result(r)['text/plain'], '7', 'a promise value is awaited');

  assert.deepStrictEqual(await k.close(), { code: 0, signal: null });
});

test('stream order, subprocess output, stdin', async (t) => {
  const k = start(t);
  await k.ready();
  // a raw write bigger than a pipe holds, in the very first cell, does not deadlock
  let r0 = await k.exec("require('fs').writeSync(1, 'x'.repeat(200000) + '\\n'); 'ok'");
  assert.strictEqual(stdout(r0).length, 200001);
  let r = await k.exec("console.log('one'); console.error('two'); process.stdout.write('three\\n'); console.log({a: 1}); 4");
  assert.deepStrictEqual(runs(r), [['stdout', 'one\n'], ['stderr', 'two\n'], ['stdout', 'three\n{ a: 1 }\n']]);
  assert.deepStrictEqual(r.map((m) => m.msg_type).slice(-2), ['execute_result', 'execute_reply']);

  // output of subprocesses and raw writes to fds 1/2 becomes stream messages too
  r = await k.exec("require('child_process').execSync('echo sub; echo sub-err >&2', {stdio: 'inherit'}); require('fs').writeSync(1, 'raw\\n'); console.log('after')");
  assert.strictEqual(stdout(r), 'sub\nraw\nafter\n');
  assert.ok(of(r, 'stream').some((m) => m.content.name === 'stderr' && m.content.text === 'sub-err\n'));
  assert.deepStrictEqual(k.raw, [], 'nothing but protocol on stdout');
  // subprocesses do not inherit the protocol's descriptors (3 and 4 under kernel.sh)
  r = await k.exec("require('child_process').execSync('ls /proc/self/fd', {encoding: 'utf8'}).split('\\n').filter(Boolean).map(Number)");
  const fds = result(r)['application/json'];
  assert.ok(fds.includes(0) && fds.includes(1) && !fds.includes(4), JSON.stringify(fds));

  // a subprocess writing more than a pipe holds, synchronously, does not deadlock
  r = await k.exec("require('child_process').execSync('seq 1 40000', {stdio: 'inherit'}); 'ok'");
  assert.strictEqual(stdout(r).split('\n').length, 40001);

  // user code reading stdin gets EOF, not the kernel's requests
  r = await k.exec("require('fs').readFileSync(0, 'utf8')");
  assert.strictEqual(result(r)['text/plain'], "''");
  r = await k.exec('1 + 1');
  assert.strictEqual(result(r)['text/plain'], '2');
  await k.close();
});

test('errors with stack and hints', async (t) => {
  const k = start(t, { config: { network: 'none', writable: ['/workspace', '/tmp'] } });
  await k.ready();
  let r = await k.exec("function inner() { throw new TypeError('bad thing') }\nfunction outer() { inner() }\nouter()");
  assert.strictEqual(reply(r).content.status, 'error');
  const e = of(r, 'error')[0].content;
  assert.strictEqual(e.ename, 'TypeError');
  assert.strictEqual(e.evalue, 'bad thing');
  const tb = e.traceback.join('\n');
  assert.match(tb, /at inner \(<cell 1>:1:/);
  assert.match(tb, /at outer \(<cell 1>:2:/);
  assert.ok(!tb.includes('kernel.js'), 'no kernel frames: ' + tb);
  assert.ok(!tb.includes('node:vm'), 'no vm frames');
  assert.ok(!('hint' in e));

  r = await k.exec('let x = ;');
  assert.strictEqual(of(r, 'error')[0].content.ename, 'SyntaxError');

  r = await k.exec("require('lodahs')");
  let c = of(r, 'error')[0].content;
  assert.strictEqual(c.evalue, "Cannot find module 'lodahs'");
  assert.match(c.hint, /module 'lodahs' is not installed in this sandbox's image; node's built-in modules are available/);
  r = await k.exec("require('htpp')");
  assert.match(of(r, 'error')[0].content.hint, /close names: http$/);

  r = await k.exec("const e = new Error('getaddrinfo ENOTFOUND example.com'); e.code = 'ENOTFOUND'; e.hostname = 'example.com'; throw e");
  assert.match(of(r, 'error')[0].content.hint, /network is disabled by this sandbox's policy \(network: none\)/);

  r = await k.exec("await fetch('http://127.0.0.1:9/')");
  c = of(r, 'error')[0].content;
  assert.strictEqual(c.evalue, 'fetch failed');
  assert.ok(!('hint' in c), 'loopback refusals are not the policy');

  r = await k.exec("const e = new Error(\"EROFS: read-only file system, open '/usr/x'\"); Object.assign(e, {code: 'EROFS', syscall: 'open', path: '/usr/x'}); throw e");
  assert.strictEqual(of(r, 'error')[0].content.hint, "'/usr/x' is read-only in this sandbox; write under /workspace or /tmp");

  r = await k.exec("import fs from 'fs'");
  assert.match(of(r, 'error')[0].content.hint, /require/);

  // a rejected promise nobody handles fails the cell
  r = await k.exec("Promise.reject(new Error('nobody caught me')); 1");
  assert.strictEqual(reply(r).content.status, 'error');
  assert.strictEqual(of(r, 'error')[0].content.evalue, 'nobody caught me');

  // a throw in a timer callback fails the cell that is waiting for it
  r = await k.exec("setTimeout(() => { throw new RangeError('in timer') }, 5)");
  assert.strictEqual(of(r, 'error')[0].content.ename, 'RangeError');

  // process.exit ends the cell, not the kernel
  r = await k.exec("x1 = 5; process.exit(2)");
  assert.strictEqual(of(r, 'error')[0].content.ename, 'ProcessExit');
  r = await k.exec('throw {custom: 1}');
  assert.strictEqual(of(r, 'error')[0].content.ename, 'Uncaught');
  r = await k.exec('x1');
  assert.strictEqual(result(r)['text/plain'], '5');
  await k.close();
});

test('top-level await, timers, display', async (t) => {
  const k = start(t);
  await k.ready();
  let r = await k.exec("const v = await new Promise((res) => setTimeout(() => res(41), 10))\nlet w = v + 1\nw");
  assert.strictEqual(reply(r).content.status, 'ok');
  assert.strictEqual(result(r)['text/plain'], '42');
  r = await k.exec('v + w');
  assert.strictEqual(result(r)['text/plain'], '83', 'variables of an await cell persist');
  r = await k.exec("async function later() { return 'L' }\nawait later()");
  assert.strictEqual(result(r)['text/plain'], "'L'");
  r = await k.exec('await later()');
  assert.strictEqual(result(r)['text/plain'], "'L'", 'functions of an await cell persist');
  r = await k.exec('for await (const x of [1, 2]) console.log(x)');
  assert.strictEqual(stdout(r), '1\n2\n');

  // output of a short timer still belongs to its cell
  r = await k.exec("setTimeout(() => console.log('tick'), 20); 'sync'");
  assert.deepStrictEqual(r.map((m) => m.msg_type), ['execute_result', 'stream', 'execute_reply']);
  assert.strictEqual(stdout(r), 'tick\n');

  r = await k.exec("display({n: 1}); display({'text/html': '<b>hi</b>'}, {raw: true}); console.log('after')");
  const d = of(r, 'display_data');
  assert.deepStrictEqual(d[0].content.data, { 'text/plain': '{ n: 1 }', 'application/json': { n: 1 } });
  assert.deepStrictEqual(d[1].content, { data: { 'text/html': '<b>hi</b>' }, metadata: {} });
  assert.deepStrictEqual(r.map((m) => m.msg_type), ['display_data', 'display_data', 'stream', 'execute_reply']);
  await k.close();
});

test('output cap, stop_on_error, malformed lines, shutdown', async (t) => {
  const k = start(t, { config: { output_limit: 100 } });
  await k.ready();
  let r = await k.exec("for (let i = 0; i < 50; i++) console.log('line ' + i)");
  const text = stdout(r);
  assert.strictEqual(Buffer.byteLength(text), 100);
  assert.strictEqual(reply(r).content.stdout_truncated, true);
  assert.strictEqual(reply(r).content.stderr_truncated, false);
  // the budget is the kernel's whole life: later text is dropped too, and said so
  r = await k.exec("console.error('more'); 5");
  assert.strictEqual(of(r, 'stream').length, 0);
  assert.strictEqual(result(r)['text/plain'], '5', 'results are not stream text');
  assert.strictEqual(reply(r).content.stderr_truncated, true);
  assert.strictEqual(reply(r).content.stdout_truncated, false);
  r = await k.exec('6');
  assert.strictEqual(reply(r).content.stderr_truncated, false);

  k.sendLine('this is not json');
  let m = await k.waitFor((x) => x.msg_type === 'error');
  assert.strictEqual(m.content.ename, 'ProtocolError');
  k.sendLine('{"msg_type": "bogus_request", "id": "b1", "content": {}}');
  m = await k.waitFor((x) => x.msg_type === 'error');
  assert.strictEqual(m.parent_id, 'b1');

  r = await k.exec('throw new Error("stop")', { stop_on_error: true });
  assert.strictEqual(reply(r).content.status, 'error');
  r = await k.exec('1', { stop_on_error: true });
  assert.deepStrictEqual(r.map((x) => x.msg_type), ['execute_reply']);
  assert.strictEqual(reply(r).content.status, 'aborted');
  r = await k.exec('2', { stop_on_error: false });
  assert.strictEqual(result(r)['text/plain'], '2');
  r = await k.exec('3', { stop_on_error: true });
  assert.strictEqual(result(r)['text/plain'], '3', 'a stop_on_error false cell ends the aborting');

  r = await k.request('shutdown_request', {});
  assert.strictEqual(reply(r).msg_type, 'shutdown_reply');
  assert.deepStrictEqual(await k.exited, { code: 0, signal: null });
});

test('SIGINT interrupts the running cell, not the kernel', async (t) => {
  const k = start(t);
  await k.ready();
  for (const code of ['let n = 0; while (true) n++', 'await new Promise(() => {})']) {
    const p = k.exec(code);
    await new Promise((r) => setTimeout(r, 300));
    k.proc.kill('SIGINT');
    const r = await p;
    assert.strictEqual(reply(r).content.status, 'error');
    assert.strictEqual(of(r, 'error')[0].content.ename, 'Interrupted');
  }
  k.proc.kill('SIGINT'); // between cells: ignored
  const r = await k.exec('typeof n');
  assert.strictEqual(result(r)['text/plain'], "'number'");
  await k.close();
});

test('SIGINT past a session call\'s deadline is a TimeoutError; before it, Interrupted', async (t) => {
  const k = start(t);
  await k.ready();
  const monotonic = () => Number(process.hrtime.bigint()) / 1e9;
  for (const [deadline, ename] of [[monotonic() + 60, 'Interrupted'], [monotonic(), 'TimeoutError']]) {
    const p = k.exec('let m = 0; while (true) m++', { deadline, timeout_ms: 250 });
    await new Promise((r) => setTimeout(r, 300));
    k.proc.kill('SIGINT');
    const err = of(await p, 'error')[0].content;
    assert.strictEqual(err.ename, ename);
    if (ename === 'TimeoutError') {
      const msg = "the sandbox's wall-time limit of 250 ms was reached; make the code faster or ask for a longer timeout";
      assert.strictEqual(err.evalue, msg);
      assert.strictEqual(err.hint, msg);
      assert.deepStrictEqual(err.traceback, [`TimeoutError: ${msg}`]);
    }
  }
  await k.close();
});

test('call mode', async (t) => {
  const k = start(t);
  await k.ready();
  const code = `
class MyTool {
  run({ numbers }) { return { sum: numbers.reduce((a, b) => a + b, 0) }; }
  async slow(a, b) { return a * b; }
}
function add(a, b) { return a + b; }
function bad() { return 10n; }
function boom() { throw new Error('tool failed'); }
module.exports = { MyTool, add };
`;
  const call = (fn, args) => k.request('call_request', { code, filename: 'tool.js', function: fn, args });
  let r = await call('MyTool.run', { numbers: [10, 20, 30] });
  assert.deepStrictEqual(reply(r).content, { status: 'ok', value: { sum: 60 } });
  r = await call('MyTool.slow', [6, 7]);
  assert.deepStrictEqual(reply(r).content, { status: 'ok', value: 42 });
  r = await call('MyTool.slow', { a: 2, b: 5 });
  assert.deepStrictEqual(reply(r).content, { status: 'ok', value: 10 }, 'an object is matched to parameter names');
  r = await call('add', [1, 2]);
  assert.strictEqual(reply(r).content.value, 3);
  r = await call('nope', {});
  assert.strictEqual(reply(r).content.error.ename, 'FunctionNotFound');
  r = await call('MyTool.nope', {});
  assert.strictEqual(reply(r).content.error.ename, 'FunctionNotFound');
  r = await call('add', [1]);
  assert.strictEqual(reply(r).content.error.ename, 'ArgumentError');
  r = await call('add', { a: 1, c: 2 });
  assert.strictEqual(reply(r).content.error.ename, 'ArgumentError');
  r = await call('bad', []);
  assert.strictEqual(reply(r).content.error.ename, 'SerializationError', 'not exported, found as a top-level declaration');
  r = await call('boom', []);
  const e = reply(r).content.error;
  assert.strictEqual(e.ename, 'Error');
  assert.strictEqual(e.evalue, 'tool failed');
  assert.match(e.traceback.join('\n'), /tool\.js:8/);
  await k.close();
});

test('globals are set on globalThis before the cell or the tool runs', async (t) => {
  const k = start(t);
  await k.ready();
  let r = await k.exec('console.log(a + b);\n[a, b]', { globals: { a: 1, b: { c: 2 } } });
  assert.strictEqual(stdout(r), '1[object Object]\n');
  assert.strictEqual(reply(r).content.status, 'ok');
  assert.deepStrictEqual(result(r)['application/json'], [1, { c: 2 }]);
  r = await k.exec('\nthrow new Error(String(v))', { globals: { v: 'w' } });
  assert.match(of(r, 'error')[0].content.traceback.join('\n'), /<cell 2>:2/, 'no line moves');
  r = await k.exec('1', { globals: [1] });
  assert.strictEqual(of(r, 'error')[0].content.ename, 'ProtocolError');
  assert.strictEqual(reply(r).content.status, 'error');
  r = await k.request('call_request', { code: 'function f() { return G * 2; }\nmodule.exports = { f };', filename: 'tool.js', function: 'f', args: [], globals: { G: 21 } });
  assert.deepStrictEqual(reply(r).content, { status: 'ok', value: 42 });
  await k.close();
});

test('started as node kernel.js (no wrapper), EOF exits 0', async (t) => {
  const k = start(t, { via: 'node' });
  await k.ready();
  const r = await k.exec("console.log('direct'); 3");
  assert.strictEqual(stdout(r), 'direct\n');
  assert.strictEqual(result(r)['text/plain'], '3');
  assert.deepStrictEqual(await k.close(), { code: 0, signal: null });
});
