'use strict';
// ward's Node kernel: runs JavaScript cells in one persistent global scope and
// speaks the JSON-lines protocol of runners/PROTOCOL.md. Node's standard
// library only. See docs/kernels.md ("Node") for the design.
//
// Started by kernel.sh (one node process, nothing else stays):
//   fd 3  the protocol (the original stdout), written by the main thread only
//   fd 4  the requests (the original stdin)
//   fd 0  /dev/null
//   fd 1, fd 2  FIFOs, drained into `stream` messages (by a worker thread once one runs)
// process.stdout/process.stderr and console are replaced by streams that emit `stream` text
// directly, so their order relative to results and errors is exact; what subprocesses write
// to fds 1/2 is put in order at sync points (syncRaw). Without kernel.sh, see setupFds().

// Cells may well declare globals named `process`, `Buffer` or `performance`: the kernel keeps
// its own references.
const process = globalThis.process;
const Buffer = globalThis.Buffer;
const performance = globalThis.performance;
const { isMainThread, workerData } = require('worker_threads');

if (!isMainThread) {
  // The drainer thread: reads the FIFOs behind fds 1 and 2 with its own event loop (so a
  // main thread blocked in execSync or a big fs.writeSync(1) never deadlocks on a full pipe)
  // and hands the bytes to the main thread.
  const net = require('net');
  const { port, sig, fds, streams } = workerData;
  Atomics.store(sig, 1, 1); // from now on the main thread leaves the FIFOs to this thread
  fds.forEach((fd, k) => {
    const i = streams[k];
    const s = new net.Socket({ fd, readable: true, writable: false });
    s.on('data', (buf) => {
      const copy = new Uint8Array(buf);
      port.postMessage({ i, buf: copy }, [copy.buffer]);
      Atomics.add(sig, 0, 1);
      Atomics.notify(sig, 0);
    });
    s.on('error', () => {});
  });
  return;
}

// ---------------------------------------------------------------------------
// Everything the kernel needs, captured before any user code runs.

const fs = require('fs');
const vm = require('vm');
const util = require('util');
const path = require('path');
const net = require('net');
const Module = require('module');
const { Worker, MessageChannel, receiveMessageOnPort } = require('worker_threads');
const { spawnSync } = require('child_process');
const { StringDecoder } = require('string_decoder');
const { Console } = require('console');
const { Writable } = require('stream');

const { openSync, closeSync, writeSync, readSync, fstatSync, unlinkSync, rmdirSync, mkdtempSync } = fs;
const JSONstringify = JSON.stringify;
const JSONparse = JSON.parse;
const inspect = util.inspect;
const isNativeError = util.types.isNativeError;
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
const realSetInterval = globalThis.setInterval;
const realClearInterval = globalThis.clearInterval;
const realSetImmediate = globalThis.setImmediate;
const realExit = process.exit.bind(process);
const realEmitWarning = process.emitWarning;
const now = () => performance.now();
const KERNEL_FILE = __filename;
const C = fs.constants;

const INSPECT = { depth: 4, colors: false, maxArrayLength: 100, maxStringLength: 100000, breakLength: 80 };
const TIMER_WAIT_MS = 500; // a cell's own timers due within this long after it ends are waited for
const RAW_SYNC_MS = 1000; // bound on the end-of-cell flush of fds 1/2
const JSON_RESULT_MAX = 1 << 20; // application/json only for values whose JSON is at most 1 MiB

// ---------------------------------------------------------------------------
// Configuration.

let config = {};
try {
  const c = JSONparse(process.env.WARD_KERNEL_CONFIG || '{}');
  if (c && typeof c === 'object' && !Array.isArray(c)) config = c;
} catch (e) {
  config = {};
}
delete process.env.WARD_KERNEL_CONFIG;
const OUTPUT_LIMIT = Number.isFinite(config.output_limit) && config.output_limit >= 0 ? config.output_limit : null;
const OUTPUT_PER_REQUEST = config.output_per_request === true;
const WRITABLE = Array.isArray(config.writable) ? config.writable.filter((p) => typeof p === 'string') : ['/workspace', '/tmp'];
const NETWORK = typeof config.network === 'string' ? config.network : null;
const MEMORY_LIMIT = Number.isFinite(config.memory_limit) && config.memory_limit > 0 ? config.memory_limit : null;
// The policy lint reads Python source only: a lint set for node is refused
// on every cell, never silently ignored (docs/policy.md, "lint").
const LINT_FIELDS = config.lint && typeof config.lint === 'object'
  ? ['deny_imports', 'deny_calls'].filter((k) => Array.isArray(config.lint[k]) && config.lint[k].length).map((k) => 'lint.' + k)
  : [];
const LINT_REFUSED = LINT_FIELDS.length
  ? { ename: 'PolicyError', evalue: `${LINT_FIELDS.join(', ')}: the node kernel cannot apply lint (it reads Python source only); remove lint from the policy or run Python`, traceback: [] }
  : null;

// ---------------------------------------------------------------------------
// File descriptors (see the header comment).

let protoFd = 1;
let reqFd = 0;
let fdMode = 'shared'; // 'wrapper' | 'reopen' | 'shared' (see docs/kernels.md)
let rawFds = null; // {targets: [fd...], readFds: [fd...], ids: {fd: [dev, ino]}}: fds 1/2 that are FIFOs we drain

function validFd(fd) {
  try {
    fstatSync(fd);
    return true;
  } catch (e) {
    return false;
  }
}

function setupFds() {
  // 1. kernel.sh started us with the protocol on fd 3 and the requests on fd 4 (shell dups of
  //    the original stdout and stdin) and stdin on /dev/null.
  const given = /^(\d+),(\d+)$/.exec(process.env.WARD_NODE_FDS || '');
  delete process.env.WARD_NODE_FDS;
  if (given && validFd(+given[1]) && validFd(+given[2])) {
    protoFd = +given[1];
    reqFd = +given[2];
    fdMode = 'wrapper';
  } else {
    // 2. Reopen the original stdout and stdin through /proc. Works for pipes we may open, files
    //    and ttys; not for sockets, and not inside ward's sandbox, where the supervisor's pipes
    //    belong to a user the sandbox does not map (EACCES).
    try {
      protoFd = openSync('/proc/self/fd/1', C.O_WRONLY | C.O_APPEND);
      reqFd = openSync('/proc/self/fd/0', C.O_RDONLY | C.O_NONBLOCK);
      closeSync(0);
      const nul = openSync('/dev/null', C.O_RDONLY);
      if (nul !== 0) throw new Error('fd 0 could not be pointed at /dev/null');
      fdMode = 'reopen';
    } catch (e) {
      // 3. Shared: the protocol stays on fd 1 and the requests on fd 0. process.stdout and
      //    console are still redirected, and fd 2 still is; what subprocesses write to fd 1
      //    reaches the supervisor raw (it takes non-JSON lines as stdout text).
      if (protoFd !== 1) {
        try {
          closeSync(protoFd);
        } catch (x) {}
      }
      protoFd = 1;
      reqFd = 0;
      fdMode = 'shared';
    }
  }

  // kernel.sh may have pointed fds 1 and 2 at FIFOs already: open their read ends and remove them.
  const fifoPaths = (process.env.WARD_NODE_FIFOS || '').split(':');
  delete process.env.WARD_NODE_FIFOS;
  if (fdMode === 'wrapper' && fifoPaths.length === 2) {
    try {
      const ids = {};
      const readFds = [];
      [1, 2].forEach((target, i) => {
        const st = fstatSync(target);
        const ps = fs.statSync(fifoPaths[i]);
        if (!st.isFIFO() || st.ino !== ps.ino || st.dev !== ps.dev) throw new Error('not our FIFO');
        ids[target] = [st.dev, st.ino];
        readFds.push(openSync(fifoPaths[i], C.O_RDWR | C.O_NONBLOCK));
      });
      rawFds = { targets: [1, 2], readFds, ids };
    } catch (e) {
      rawFds = null;
    }
    for (const p of fifoPaths) {
      try {
        unlinkSync(p);
      } catch (e) {}
    }
    if (rawFds) return;
  }

  // Point fds 1 and 2 (only 2 when shared) at FIFOs. node has no pipe() or dup2(): make FIFOs
  // with mkfifo(1), open their read ends O_RDWR (never EOF, never blocks), then close the
  // target descriptor and open the write end, which takes the lowest free number: the target.
  const targets = fdMode === 'shared' ? [2] : [1, 2];
  let dir = null;
  for (const base of ['/tmp', ...WRITABLE, '/dev/shm']) {
    try {
      dir = mkdtempSync(path.join(base, '.ward-node-'));
      break;
    } catch (e) {
      dir = null;
    }
  }
  if (!dir) return;
  const fifos = targets.map((fd) => path.join(dir, `fd${fd}`));
  try {
    let r = spawnSync('/usr/bin/mkfifo', ['-m', '600', ...fifos], { stdio: 'ignore' });
    if (r.error || r.status !== 0) r = spawnSync('mkfifo', ['-m', '600', ...fifos], { stdio: 'ignore' });
    if (r.error || r.status !== 0) return;
    const readFds = fifos.map((f) => openSync(f, C.O_RDWR | C.O_NONBLOCK));
    const ids = {};
    targets.forEach((target, i) => {
      closeSync(target);
      const w = openSync(fifos[i], C.O_WRONLY);
      if (w !== target) throw new Error(`fd ${target} could not be redirected`);
      const st = fstatSync(target);
      ids[target] = [st.dev, st.ino];
    });
    rawFds = { targets, readFds, ids };
  } finally {
    for (const f of fifos) {
      try {
        unlinkSync(f);
      } catch (e) {}
    }
    try {
      rmdirSync(dir);
    } catch (e) {}
  }
}

try {
  setupFds();
} catch (e) {
  // Carry on with whatever was set up; the protocol fd is always valid.
}

// ---------------------------------------------------------------------------
// Protocol output.

const sleepBuf = new Int32Array(new SharedArrayBuffer(4));
function sleepSync(ms) {
  Atomics.wait(sleepBuf, 0, 0, ms);
}

function writeAll(fd, buf) {
  let off = 0;
  while (off < buf.length) {
    try {
      off += writeSync(fd, buf, off, buf.length - off);
    } catch (e) {
      if (e.code === 'EAGAIN') {
        sleepSync(1);
        continue;
      }
      if (e.code === 'EPIPE' || e.code === 'EBADF') realExit(0); // the supervisor is gone
      throw e;
    }
  }
}

function send(msgType, content, parentId) {
  flushStream();
  sendNow(msgType, content, parentId);
}

function sendNow(msgType, content, parentId) {
  const msg = { msg_type: msgType };
  if (parentId !== undefined && parentId !== null) msg.parent_id = parentId;
  msg.time = Date.now() / 1000;
  msg.content = content;
  writeAll(protoFd, Buffer.from(JSONstringify(msg) + '\n', 'utf8'));
}

// ---------------------------------------------------------------------------
// Requests and the output budget.

let current = null; // the request being handled
let lastReq = null; // the latest request: late output is attributed to it
let cellSeq = 0; // which cell created a timer

function cutUtf8(text, maxBytes) {
  const b = Buffer.from(text, 'utf8');
  if (b.length <= maxBytes) return text;
  let end = maxBytes;
  while (end > 0 && (b[end] & 0xc0) === 0x80) end--; // do not split a character
  return b.subarray(0, end).toString('utf8');
}

// Stream text is counted against output_limit over the kernel's whole life (stdout and
// stderr together, UTF-8 bytes); what does not fit is dropped and the request it belongs to
// is marked truncated. Text is held back briefly and joined: consecutive text of one stream
// goes out as one message when nothing else came between and it is at most 50 ms old (or
// 64 KiB long). Every other message flushes it first, so the order is exact.
let outputUsed = 0;
let held = null; // {name, parts: [], bytes, req}
let heldTimer = null;
const HOLD_MS = 50;
const HOLD_BYTES = 65536;

function flushStream() {
  if (heldTimer) {
    realClearTimeout(heldTimer);
    heldTimer = null;
  }
  if (!held) return;
  const h = held;
  held = null;
  sendNow('stream', { name: h.name, text: h.parts.join('') }, h.req ? h.req.id : undefined);
}

function emitStream(name, text) {
  if (typeof text !== 'string' || text.length === 0) return;
  const req = lastReq;
  let n = Buffer.byteLength(text, 'utf8');
  if (OUTPUT_LIMIT !== null) {
    if (outputUsed + n > OUTPUT_LIMIT) {
      const room = OUTPUT_LIMIT - outputUsed;
      if (req) req.truncated[name] = true;
      if (room <= 0) return;
      text = cutUtf8(text, room);
      n = Buffer.byteLength(text, 'utf8');
      if (!text) return;
    }
    outputUsed += n;
  }
  if (held && (held.name !== name || held.req !== req)) flushStream();
  if (!held) {
    held = { name, parts: [], bytes: 0, req };
    heldTimer = realSetTimeout(flushStream, HOLD_MS);
    heldTimer.unref();
  }
  held.parts.push(text);
  held.bytes += n;
  if (held.bytes >= HOLD_BYTES) flushStream();
}

// ---------------------------------------------------------------------------
// Raw output on fds 1/2 (subprocesses, fs.writeSync(1), native code).

// Only has to be unlikely to occur by accident (user code could write it on purpose, and
// would only confuse its own output).
const MARK = Buffer.from(`\u0000ward-sync-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}\u0000`, 'latin1');
const raw = [0, 1].map((i) => ({
  name: i === 0 ? 'stdout' : 'stderr',
  decoder: new StringDecoder('utf8'),
  pending: Buffer.alloc(0),
  sent: 0,
  seen: 0,
}));
let drain = null; // {worker, port, sig, alive}

function partialMarkSuffix(buf) {
  const from = Math.max(0, buf.length - MARK.length + 1);
  for (let j = from; j < buf.length; j++) {
    if (buf[j] === 0 && MARK.subarray(0, buf.length - j).equals(buf.subarray(j))) return buf.length - j;
  }
  return 0;
}

function rawBytes(i, bytes) {
  const st = raw[i];
  let buf = st.pending.length ? Buffer.concat([st.pending, bytes]) : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  for (;;) {
    const idx = buf.indexOf(MARK);
    if (idx < 0) break;
    if (idx > 0) emitStream(st.name, st.decoder.write(buf.subarray(0, idx)));
    st.seen++;
    buf = buf.subarray(idx + MARK.length);
  }
  const keep = partialMarkSuffix(buf);
  if (buf.length - keep > 0) emitStream(st.name, st.decoder.write(buf.subarray(0, buf.length - keep)));
  st.pending = keep ? Buffer.from(buf.subarray(buf.length - keep)) : Buffer.alloc(0);
}

// The drainer thread starts after the first request, or before it when the code starts a
// subprocess or writes to fd 1 or 2 itself (starting it with the kernel would slow the first
// cell down by several milliseconds). Until it runs, the main thread reads the FIFOs itself,
// without blocking, whenever output has to be in order: before a result, an error, a reply,
// and before user output (at most every 20 ms).
function ensureDrain() {
  if (!rawFds || drain) return;
  const sig = new Int32Array(new SharedArrayBuffer(8));
  const { port1, port2 } = new MessageChannel();
  const worker = new Worker(KERNEL_FILE, {
    workerData: { port: port2, sig, fds: rawFds.readFds, streams: rawFds.targets.map((fd) => fd - 1) },
    transferList: [port2],
    stdout: true,
    stderr: true,
    env: {},
  });
  drain = { worker, port: port1, sig, alive: true };
  port1.on('message', (m) => rawBytes(m.i, m.buf));
  worker.on('error', () => {});
  worker.on('exit', () => {
    drain.alive = false;
    // Nobody reads the FIFOs any more: point them at /dev/null so writers never block.
    for (const fd of rawFds.targets) {
      try {
        closeSync(fd);
        openSync('/dev/null', C.O_WRONLY);
      } catch (e) {}
    }
  });
  worker.unref();
}

const scratch = Buffer.alloc(65536);
function drainDirect() {
  if (!rawFds || (drain && Atomics.load(drain.sig, 1) !== 0)) return;
  rawFds.readFds.forEach((fd, k) => {
    const i = rawFds.targets[k] - 1;
    for (;;) {
      let n = 0;
      try {
        n = readSync(fd, scratch, 0, scratch.length, null);
      } catch (e) {
        break; // EAGAIN: empty
      }
      if (n <= 0) break;
      rawBytes(i, Buffer.from(scratch.subarray(0, n)));
    }
  });
}

// Subprocesses are what usually writes to fds 1/2: after one ran (or while one runs), or
// after the code wrote to fd 1 or 2 itself, a write to process.stdout/stderr first syncs, so
// that the raw output comes first. Otherwise it syncs at most every 20 ms and in between
// passes on what the drainer has already read.
let lastSync = 0;
let rawDirty = false;
let liveChildren = 0;
function hookSubprocesses() {
  const cp = require('child_process');
  try {
    // fs.writeSync(1, ...) and friends: a write bigger than a FIFO holds needs the drainer
    const b = process.binding('fs');
    for (const name of ['writeString', 'writeBuffer', 'writeBuffers', 'writeFileUtf8']) {
      const orig = b[name];
      if (typeof orig !== 'function') continue;
      b[name] = function (fd) {
        if ((fd === 1 || fd === 2) && rawFds.targets.includes(fd)) {
          ensureDrain();
          rawDirty = true;
        }
        return Reflect.apply(orig, this, arguments);
      };
    }
  } catch (e) {}
  try {
    const b = process.binding('spawn_sync'); // behind spawnSync, execSync, execFileSync
    const orig = b.spawn;
    b.spawn = function spawn() {
      ensureDrain();
      try {
        return Reflect.apply(orig, this, arguments);
      } finally {
        rawDirty = true;
      }
    };
  } catch (e) {}
  const origSpawn = cp.ChildProcess.prototype.spawn; // behind spawn, exec, execFile, fork
  cp.ChildProcess.prototype.spawn = function spawn() {
    let done = false;
    const end = () => {
      if (!done) liveChildren--;
      done = true;
      rawDirty = true;
    };
    ensureDrain();
    liveChildren++;
    rawDirty = true;
    try {
      const r = Reflect.apply(origSpawn, this, arguments);
      this.once('exit', end);
      this.once('error', end);
      return r;
    } catch (e) {
      end();
      throw e;
    }
  };
}

function pollRaw() {
  if (!rawFds) return;
  if (!drain) {
    if (now() - lastSync > 20) {
      lastSync = now();
      drainDirect();
    }
    return;
  }
  if (!drain.alive) return;
  if (rawDirty || liveChildren > 0 || now() - lastSync > 20) {
    rawDirty = false;
    return syncRaw();
  }
  let m;
  while ((m = receiveMessageOnPort(drain.port))) rawBytes(m.message.i, m.message.buf);
}

// Make sure everything written to fds 1/2 before now has become `stream` messages: write a
// marker to each and wait (bounded) until the drainer has passed it along.
function syncRaw() {
  if (!rawFds) return;
  if (!drain) {
    lastSync = now();
    drainDirect();
    rawDirty = false;
    return;
  }
  if (!drain.alive) return;
  for (const fd of rawFds.targets) {
    try {
      const st = fstatSync(fd);
      if (st.dev !== rawFds.ids[fd][0] || st.ino !== rawFds.ids[fd][1]) continue; // user code replaced it
      writeAll(fd, MARK);
      raw[fd - 1].sent++;
    } catch (e) {}
  }
  drainDirect();
  const deadline = now() + RAW_SYNC_MS;
  for (;;) {
    lastSync = now();
    const v = Atomics.load(drain.sig, 0);
    let m;
    while ((m = receiveMessageOnPort(drain.port))) rawBytes(m.message.i, m.message.buf);
    if (raw.every((st) => st.seen >= st.sent)) {
      rawDirty = false; // (the markers' own writes set it)
      return;
    }
    const left = deadline - now();
    if (left <= 0 || !drain.alive) break;
    Atomics.wait(drain.sig, 0, v, Math.min(left, 50));
  }
  rawDirty = false;
  for (const st of raw) {
    // timed out: give up waiting for stale markers, pass on what is held back
    st.seen = st.sent;
    if (st.pending.length) emitStream(st.name, st.decoder.write(st.pending));
    st.pending = Buffer.alloc(0);
  }
}

// ---------------------------------------------------------------------------
// process.stdout / process.stderr / console for user code.

function makeOutStream(name, fd) {
  const decoder = new StringDecoder('utf8');
  const s = new Writable({
    decodeStrings: false,
    write(chunk, encoding, cb) {
      emitStream(name, typeof chunk === 'string' ? chunk : decoder.write(chunk));
      cb();
    },
  });
  // Synchronous, unbuffered: output is emitted in program order with results and errors.
  s.write = function write(chunk, encoding, cb) {
    if (typeof encoding === 'function') {
      cb = encoding;
      encoding = undefined;
    }
    let text;
    if (typeof chunk === 'string') {
      text = encoding && encoding !== 'utf8' && encoding !== 'utf-8' && Buffer.isEncoding(encoding) ? Buffer.from(chunk, encoding).toString('utf8') : chunk;
    } else if (chunk instanceof Uint8Array) {
      text = decoder.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    } else {
      const err = new TypeError('The "chunk" argument must be of type string or an instance of Buffer or Uint8Array');
      err.code = 'ERR_INVALID_ARG_TYPE';
      throw err;
    }
    pollRaw();
    emitStream(name, text);
    if (typeof cb === 'function') process.nextTick(cb);
    return true;
  };
  s.end = function end(chunk, encoding, cb) {
    if (typeof chunk === 'function') return chunk(), this;
    if (chunk !== undefined && chunk !== null) this.write(chunk, encoding);
    if (typeof cb === 'function') process.nextTick(cb);
    if (typeof encoding === 'function') process.nextTick(encoding);
    return this;
  };
  s.fd = fd;
  s.isTTY = false;
  s._type = 'pipe';
  s._isStdio = true;
  s.destroySoon = s.destroy = function () {
    return this;
  };
  s.hasColors = () => false;
  s.getColorDepth = () => 1;
  return s;
}

const userStdout = makeOutStream('stdout', 1);
const userStderr = makeOutStream('stderr', 2);
const userConsole = new Console({ stdout: userStdout, stderr: userStderr, colorMode: false });

// ---------------------------------------------------------------------------
// A light JavaScript lexer, enough to find the top-level statements of a cell: their kinds,
// where they end (semicolons, automatic semicolon insertion at newlines, the end of blocks),
// and the names they declare. Used to (1) turn top-level let/const/class declarations into
// assignments to globals, so a later cell may declare the same name again, and (2) run a cell
// that uses top-level `await` inside an async function, its last expression statement turned
// into `return (...)`.

const PUNCTS = ['>>>=', '...', '===', '!==', '**=', '<<=', '>>=', '>>>', '&&=', '||=', '??=', '=>', '==', '!=', '<=', '>=', '&&', '||', '??', '?.', '++', '--', '+=', '-=', '*=', '/=', '%=', '&=', '|=', '^=', '**', '<<', '>>'];
const REGEX_AFTER_WORD = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void', 'throw', 'case', 'do', 'else', 'yield', 'await', 'extends']);
const ID_RE = /(?:[$_\p{ID_Start}]|\\u[0-9a-fA-F{])(?:[$\u200c\u200d\p{ID_Continue}]|\\u[0-9a-fA-F{}]+)*/uy;
const NUM_RE = /(?:0[xXoObB][0-9a-fA-F_]+n?|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?n?)/y;
const NEWLINES = '\n\r\u2028\u2029';

function lex(src) {
  const n = src.length;

  function skipString(i) {
    const q = src[i];
    for (let j = i + 1; j < n; j++) {
      const c = src[j];
      if (c === '\\') j++;
      else if (c === q) return j + 1;
      else if (c === '\n' || c === '\r') break;
    }
    throw new SyntaxError('unterminated string');
  }

  function skipTemplate(i) {
    for (let j = i + 1; j < n; j++) {
      const c = src[j];
      if (c === '\\') j++;
      else if (c === '`') return j + 1;
      else if (c === '$' && src[j + 1] === '{') j = run(j + 2, true).end - 1;
    }
    throw new SyntaxError('unterminated template');
  }

  function skipRegex(i) {
    let inClass = false;
    for (let j = i + 1; j < n; j++) {
      const c = src[j];
      if (c === '\\') j++;
      else if (NEWLINES.includes(c)) return -1;
      else if (c === '[') inClass = true;
      else if (c === ']') inClass = false;
      else if (c === '/' && !inClass) {
        j++;
        while (j < n && /[\w$]/.test(src[j])) j++;
        return j;
      }
    }
    return -1;
  }

  function run(start, nested) {
    const toks = [];
    let i = start;
    let nl = false;
    let depth = 0;
    const regexAllowed = () => {
      const p = toks[toks.length - 1];
      if (!p) return true;
      if (p.t === 'name') return REGEX_AFTER_WORD.has(p.v);
      if (p.t !== 'p') return false;
      return !(p.v === ')' || p.v === ']' || p.v === '++' || p.v === '--');
    };
    const push = (t, s, e, d) => {
      toks.push({ t, v: src.slice(s, e), s, e, nl, d });
      nl = false;
    };
    while (i < n) {
      const c = src[i];
      if (NEWLINES.includes(c)) {
        nl = true;
        i++;
        continue;
      }
      if (c === ' ' || c === '\t' || c === '\v' || c === '\f' || c === '\ufeff' || c === '\u00a0' || (c > '\u007f' && /\s/.test(c))) {
        i++;
        continue;
      }
      if (c === '/' && src[i + 1] === '/') {
        while (i < n && !NEWLINES.includes(src[i])) i++;
        continue;
      }
      if (c === '/' && src[i + 1] === '*') {
        const j = src.indexOf('*/', i + 2);
        if (j < 0) throw new SyntaxError('unterminated comment');
        for (let k = i; k < j; k++) if (NEWLINES.includes(src[k])) nl = true;
        i = j + 2;
        continue;
      }
      if (c === '#' && i === 0 && src[1] === '!') {
        while (i < n && !NEWLINES.includes(src[i])) i++;
        continue;
      }
      const s = i;
      if (c === '"' || c === "'") {
        i = skipString(i);
        push('str', s, i, depth);
        continue;
      }
      if (c === '`') {
        i = skipTemplate(i);
        push('tpl', s, i, depth);
        continue;
      }
      ID_RE.lastIndex = c === '#' ? i + 1 : i;
      let m = ID_RE.exec(src);
      if (m) {
        i = ID_RE.lastIndex;
        push('name', s, i, depth);
        continue;
      }
      if (c >= '0' && c <= '9') {
        NUM_RE.lastIndex = i;
        m = NUM_RE.exec(src);
        i = m ? NUM_RE.lastIndex : i + 1;
        while (i < n && /[\w$]/.test(src[i])) i++;
        push('num', s, i, depth);
        continue;
      }
      if (c === '.' && src[i + 1] >= '0' && src[i + 1] <= '9') {
        NUM_RE.lastIndex = i;
        m = NUM_RE.exec(src);
        i = m ? NUM_RE.lastIndex : i + 1;
        push('num', s, i, depth);
        continue;
      }
      if (c === '/' && regexAllowed()) {
        const j = skipRegex(i);
        if (j > 0) {
          i = j;
          push('re', s, i, depth);
          continue;
        }
      }
      let p = c;
      for (const q of PUNCTS) {
        if (src.startsWith(q, i)) {
          p = q;
          break;
        }
      }
      if (p === '?.' && src[i + 2] >= '0' && src[i + 2] <= '9') p = '?';
      i += p.length;
      if (p === '{' || p === '(' || p === '[') {
        push('p', s, i, depth);
        depth++;
      } else if (p === '}' || p === ')' || p === ']') {
        if (nested && p === '}' && depth === 0) return { toks, end: i };
        depth = Math.max(0, depth - 1);
        push('p', s, i, depth);
      } else {
        push('p', s, i, depth);
      }
    }
    if (nested) throw new SyntaxError('unterminated template');
    return { toks, end: i };
  }

  const toks = run(0, false).toks;
  // match brackets
  const stack = [];
  toks.forEach((t, k) => {
    if (t.t !== 'p') return;
    if (t.v === '(' || t.v === '[' || t.v === '{') stack.push(k);
    else if (t.v === ')' || t.v === ']' || t.v === '}') {
      const o = stack.pop();
      if (o !== undefined) {
        toks[o].match = k;
        t.match = o;
      }
    }
  });
  return toks;
}

const BLOCK_WORDS = new Set(['if', 'for', 'while', 'try', 'switch', 'with', 'do', 'function', 'class']);
const HEAD_WORDS = new Set(['if', 'for', 'while', 'switch', 'catch', 'with']);
const OTHER_WORDS = new Set(['return', 'throw', 'break', 'continue', 'debugger', 'export']);
const CONT_WORDS = new Set(['new', 'typeof', 'void', 'delete', 'await', 'in', 'instanceof', 'of', 'else', 'do', 'extends', 'case', 'const', 'let', 'var', 'function', 'class', 'if', 'for', 'while', 'try', 'finally', 'catch', 'switch', 'import', 'export', 'with', 'yield']);
const NO_CONT_PUNCT = new Set([')', ']', '}', '++', '--']);
const CONT_NEXT_PUNCT = new Set(['.', '?.', ',', '(', '[', '?', ':', '=>', '+', '-', '*', '/', '%', '**', '==', '!=', '===', '!==', '<', '>', '<=', '>=', '&&', '||', '??', '&', '|', '^', '<<', '>>', '>>>', '=', '+=', '-=', '*=', '/=', '%=', '**=', '<<=', '>>=', '>>>=', '&=', '|=', '^=', '&&=', '||=', '??=']);

function isP(t, v) {
  return t && t.t === 'p' && t.v === v;
}
function isW(t, v) {
  return t && t.t === 'name' && t.v === v;
}

function analyze(src) {
  const toks = lex(src);

  function kindAt(a) {
    const t = toks[a];
    const u = toks[a + 1];
    if (t.t === 'p') return t.v === '{' ? 'block' : 'expr';
    if (t.t !== 'name') return 'expr';
    if (t.v === 'function') return 'func';
    if (t.v === 'async' && isW(u, 'function') && !u.nl) return 'func';
    if (t.v === 'class') return 'class';
    if (BLOCK_WORDS.has(t.v)) return 'block';
    if (t.v === 'var' || t.v === 'const') return 'decl';
    if (t.v === 'let' && u && (u.t === 'name' || isP(u, '[') || isP(u, '{'))) return 'decl';
    if (OTHER_WORDS.has(t.v)) return 'other';
    if (t.v === 'import' && !(isP(u, '(') || isP(u, '.'))) return 'other';
    if (isP(u, ':')) return 'block'; // a label
    return 'expr';
  }

  function isHeadClose(k) {
    const t = toks[k];
    if (!isP(t, ')') || t.match === undefined) return false;
    const before = toks[t.match - 1];
    if (before && before.t === 'name' && HEAD_WORDS.has(before.v)) return true;
    return isW(before, 'await') && isW(toks[t.match - 2], 'for');
  }

  function continues(k) {
    // does token k (first on its line) continue the statement the previous token is in?
    const prev = toks[k - 1];
    const next = toks[k];
    if (next.t === 'tpl') return true;
    if (next.t === 'p' && CONT_NEXT_PUNCT.has(next.v)) return true;
    if (next.t === 'name' && (next.v === 'in' || next.v === 'instanceof' || next.v === 'else' || next.v === 'catch' || next.v === 'finally')) return true;
    if (isP(next, '{') && isP(prev, ')')) return true;
    if (prev.t === 'p') {
      if (!NO_CONT_PUNCT.has(prev.v)) return true;
      return isHeadClose(k - 1);
    }
    if (prev.t === 'name' && CONT_WORDS.has(prev.v)) return true;
    return false;
  }

  const stmts = [];
  let k = 0;
  while (k < toks.length) {
    if (isP(toks[k], ';')) {
      k++;
      continue;
    }
    const a = k;
    const kind = kindAt(a);
    const blocky = kind === 'block' || kind === 'func' || kind === 'class';
    const isDo = isW(toks[a], 'do');
    let b = toks.length;
    let next = toks.length;
    for (let m = a + 1; m < toks.length; m++) {
      const t = toks[m];
      if (t.d !== 0 || isP(t, ')') || isP(t, ']') || isP(t, '}')) continue;
      if (isP(t, ';')) {
        b = m;
        next = m + 1;
        break;
      }
      if (t.nl && !continues(m) && !(isDo && isW(t, 'while'))) {
        b = m;
        next = m;
        break;
      }
      const prev = toks[m - 1];
      if (blocky && isP(prev, '}') && prev.d === 0 && !(t.t === 'name' && (t.v === 'else' || t.v === 'catch' || t.v === 'finally' || (isDo && t.v === 'while')))) {
        b = m;
        next = m;
        break;
      }
    }
    stmts.push({ a, b, kind });
    k = next;
  }
  return { toks, stmts };
}

// Names bound by a destructuring pattern toks[p..c] (c is the closing bracket), or null.
function patternNames(toks, p, c) {
  const names = [];
  let ok = true;
  function target(i) {
    const t = toks[i];
    if (t.t === 'name') {
      names.push(t.v);
      return i + 1;
    }
    if ((isP(t, '{') || isP(t, '[')) && t.match !== undefined) {
      walk(i);
      return t.match + 1;
    }
    ok = false;
    return i + 1;
  }
  function skipDefault(i, close) {
    while (i < close && !(isP(toks[i], ',') && toks[i].d === toks[close].d + 1)) {
      i = toks[i].match !== undefined && toks[i].match > i ? toks[i].match + 1 : i + 1;
    }
    return i;
  }
  function walk(o) {
    const close = toks[o].match;
    const obj = isP(toks[o], '{');
    let i = o + 1;
    while (ok && i < close) {
      if (isP(toks[i], ',')) {
        i++;
        continue;
      }
      if (isP(toks[i], '...')) {
        i = target(i + 1);
        continue;
      }
      if (obj) {
        const key = toks[i];
        let j = i + 1;
        if (isP(key, '[') && key.match !== undefined) j = key.match + 1;
        if (isP(toks[j], ':')) i = target(j + 1);
        else if (key.t === 'name') {
          names.push(key.v);
          i = j;
        } else {
          ok = false;
          break;
        }
      } else {
        i = target(i);
      }
      if (isP(toks[i], '=')) i = skipDefault(i + 1, close);
    }
  }
  if (toks[p].match !== c) return null;
  walk(p);
  return ok ? names : null;
}

// Rewrites for a cell: declarations -> assignments; for the await form, the last expression
// statement -> return. Returns {script, asyncBody, names, funcs} or null.
function transform(src, forAwait) {
  let a;
  try {
    a = analyze(src);
  } catch (e) {
    return null;
  }
  const { toks, stmts } = a;
  const edits = [];
  const names = [];
  const funcs = [];
  for (const st of stmts) {
    const t0 = toks[st.a];
    if (st.kind === 'decl') {
      const kw = t0.v;
      // split the declarators at top-level commas
      const parts = [];
      let p = st.a + 1;
      for (let m = st.a + 1; m <= st.b; m++) {
        if (m === st.b || (isP(toks[m], ',') && toks[m].d === 0)) {
          parts.push([p, m]);
          p = m + 1;
        }
      }
      const out = [];
      let bad = false;
      for (const [p0, q] of parts) {
        if (q <= p0) {
          bad = true;
          break;
        }
        const t = toks[p0];
        const text = src.slice(t.s, toks[q - 1].e);
        if (t.t === 'name') {
          names.push(t.v);
          if (q - p0 === 1) {
            if (kw !== 'var') out.push(`(${t.v} = void 0)`);
          } else if (isP(toks[p0 + 1], '=')) {
            out.push(`(${text})`);
          } else {
            bad = true;
          }
        } else if ((isP(t, '{') || isP(t, '[')) && t.match !== undefined && t.match < q && isP(toks[t.match + 1], '=')) {
          const ns = patternNames(toks, p0, t.match);
          if (ns) names.push(...ns);
          out.push(`(${text})`);
        } else {
          bad = true;
        }
        if (bad) break;
      }
      if (bad) continue;
      edits.push({ s: t0.s, e: toks[st.b - 1].e, text: `;void (${out.join(', ') || '0'})` });
    } else if (st.kind === 'class') {
      const nameTok = toks[st.a + 1];
      const last = toks[st.b - 1];
      if (nameTok && nameTok.t === 'name' && nameTok.v !== 'extends' && isP(last, '}')) {
        names.push(nameTok.v);
        edits.push({ s: t0.s, e: last.e, text: `;void (${nameTok.v} = ${src.slice(t0.s, last.e)})` });
      }
    } else if (st.kind === 'func') {
      let j = st.a + 1;
      if (isW(toks[st.a], 'async')) j++;
      if (isP(toks[j], '*')) j++;
      if (toks[j] && toks[j].t === 'name') funcs.push(toks[j].v);
    }
  }
  const apply = (list) => {
    let out = '';
    let pos = 0;
    for (const ed of list.slice().sort((x, y) => x.s - y.s || x.e - y.e)) {
      out += src.slice(pos, ed.s) + ed.text;
      pos = ed.e;
    }
    return out + src.slice(pos);
  };
  const script = apply(edits);
  let asyncBody = null;
  if (forAwait) {
    const list = edits.slice();
    const last = stmts[stmts.length - 1];
    if (last && last.kind === 'expr') {
      const s = toks[last.a].s;
      const e = toks[last.b - 1].e;
      list.push({ s, e: s, text: 'return (' });
      list.push({ s: e, e, text: '\n)' });
    }
    const exports = funcs.map((f) => `globalThis[${JSONstringify(f)}] = ${f}; `).join('');
    asyncBody = '(async () => { ' + exports + apply(list) + '\n})()';
  }
  return { script, asyncBody, names, funcs };
}

// ---------------------------------------------------------------------------
// Compiling and running a cell.

const importDyn = vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
process.emitWarning = function emitWarning(w, ...rest) {
  // using the main context's loader for import() in cells is reported as experimental
  if (String((w && w.message) || w).includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) return;
  return realEmitWarning.call(this, w, ...rest);
};

// Sources of recent cells and tool files, for the code line shown above a traceback.
const sources = new Map(); // filename -> {original, executed}
function remember(filename, original, executed) {
  sources.set(filename, { original, executed });
  if (sources.size > 200) sources.delete(sources.keys().next().value);
}

const RUN_OPTS = { displayErrors: false, breakOnSigint: true };

function compile(src, filename, original) {
  const opts = { filename };
  if (importDyn) opts.importModuleDynamically = importDyn;
  const s = new vm.Script(src, opts);
  remember(filename, original, src);
  return s;
}

function hasAwait(src) {
  return /\bawait\b/.test(src);
}

// Returns a function that runs the cell and returns its value (a promise for the await form).
function prepareCell(code, filename) {
  const tr = transform(code, hasAwait(code));
  const precreate = () => {
    if (!tr) return;
    for (const n of tr.names) if (!(n in globalThis)) globalThis[n] = undefined;
  };
  let firstErr = null;
  if (tr) {
    try {
      const s = compile(tr.script, filename, code);
      return () => (precreate(), s.runInThisContext(RUN_OPTS));
    } catch (e) {
      firstErr = e;
    }
    if (tr.asyncBody !== null) {
      try {
        const s = compile(tr.asyncBody, filename, code);
        return () => (precreate(), s.runInThisContext(RUN_OPTS));
      } catch (e) {
        if (hasAwait(code)) firstErr = e;
      }
    }
  }
  try {
    const s = compile(code, filename, code);
    return () => s.runInThisContext(RUN_OPTS);
  } catch (e) {
    if (!tr && hasAwait(code) && /await|reserved word/.test(String(e.message))) {
      try {
        const s = compile('(async () => { ' + code + '\n})()', filename, code);
        return () => s.runInThisContext(RUN_OPTS);
      } catch (e2) {}
    }
    throw firstErr && /await|reserved word/.test(String(e.message)) ? firstErr : e;
  }
}

// ---------------------------------------------------------------------------
// Values and errors.

function isThenable(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function';
}

function isPlain(v) {
  if (Array.isArray(v)) return true;
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === null || proto === Object.prototype;
}

function safeInspect(v) {
  try {
    return inspect(v, INSPECT);
  } catch (e) {
    return `[value that cannot be inspected: ${e && e.message}]`;
  }
}

function mimeBundle(v) {
  const data = { 'text/plain': safeInspect(v) };
  if (isPlain(v)) {
    try {
      const j = JSONstringify(v);
      if (typeof j === 'string' && j.length <= JSON_RESULT_MAX) data['application/json'] = JSONparse(j);
    } catch (e) {}
  }
  return data;
}

class Interrupt {}
const INTERRUPT = { ename: 'Interrupted', evalue: 'the cell was interrupted (SIGINT)' };
// A session call's deadline comes with it (runners/session/agent.py): seconds on
// CLOCK_MONOTONIC, the clock of python's time.monotonic() and of process.hrtime. An interrupt
// at or past it is the timeout, said as a one-shot says it (lib/kernel-errors.c).
const monotonic = () => Number(process.hrtime.bigint()) / 1e9;
function callDeadline(c) {
  return typeof c.deadline === 'number' && Number.isInteger(c.timeout_ms) ? { at: c.deadline, ms: c.timeout_ms } : null;
}
function interruptError(deadline) {
  if (!deadline || monotonic() < deadline.at - 0.005) return { ...INTERRUPT, traceback: [] };
  const msg = `the sandbox's wall-time limit of ${deadline.ms} ms was reached; make the code faster or ask for a longer timeout`;
  return { ename: 'TimeoutError', evalue: msg, hint: msg, traceback: [`TimeoutError: ${msg}`] };
}

class ExitSignal {
  constructor(code) {
    this.code = code;
  }
}

function isErrorLike(e) {
  return isNativeError(e) || (e !== null && typeof e === 'object' && typeof e.message === 'string' && typeof e.stack === 'string');
}

function isCellFrame(line, files) {
  return line.includes('(<cell ') || line.includes(' <cell ') || files.some((f) => line.includes(f));
}

// The source line of the innermost cell (or tool file) frame, node-style:
//   <cell 3>:2
//   f(x)
//   ^
function codeFrame(lines, files) {
  for (const l of lines) {
    if (!/^\s+at /.test(l)) continue;
    const m = /(<cell \d+>|[^\s(]+):(\d+):(\d+)\)?$/.exec(l);
    const src = m && sources.get(m[1]);
    if (!src) continue;
    const n = Number(m[2]);
    const orig = src.original.split(/\r?\n/)[n - 1];
    if (orig === undefined) return [];
    const exec = src.executed.split(/\r?\n/)[n - 1];
    const out = [`${m[1]}:${n}`, orig];
    if (exec === orig) out.push(' '.repeat(Math.max(0, Number(m[3]) - 1)) + '^');
    out.push('');
    return out;
  }
  return [];
}

function traceback(err, files) {
  const stack = typeof err.stack === 'string' ? err.stack : `${err.name}: ${err.message}`;
  let lines = stack.split('\n');
  if (err.code === 'MODULE_NOT_FOUND' && Array.isArray(err.requireStack) && err.requireStack.every((f) => f === cellFile)) {
    lines = lines.filter((l) => l !== 'Require stack:' && l !== `- ${cellFile}`);
  }
  const isFrame = (l) => /^\s+at /.test(l);
  let lastCell = -1;
  lines.forEach((l, i) => {
    if (isFrame(l) && isCellFrame(l, files)) lastCell = i;
  });
  const out = [];
  lines.forEach((l, i) => {
    if (!isFrame(l)) return out.push(l);
    if (l.includes(KERNEL_FILE)) return;
    if (lastCell >= 0 ? i > lastCell : /\(node:vm[:)]|\(node:internal\/vm|at new Script \(/.test(l)) return;
    out.push(l);
  });
  while (out.length && out[out.length - 1] === '') out.pop();
  if (!/^(<cell \d+>|\S+):\d+$/.test(out[0] || '')) out.unshift(...codeFrame(lines, files));
  return out;
}

// Edit distance counting a swap of two neighbours as one edit (optimal string alignment).
function editDistance(a, b) {
  const d = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = 0; i <= a.length; i++) d[i][0] = i;
  for (let j = 0; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

function availableModules() {
  const set = new Set(Module.builtinModules.filter((m) => !m.startsWith('_') && !m.includes('/')));
  let dirs = [];
  try {
    dirs = userRequire.resolve.paths('x') || [];
  } catch (e) {}
  for (const d of dirs) {
    let ents = [];
    try {
      ents = fs.readdirSync(d);
    } catch (e) {
      continue;
    }
    for (const e of ents) {
      if (e.startsWith('.')) continue;
      if (e.startsWith('@')) {
        try {
          for (const s of fs.readdirSync(path.join(d, e))) set.add(`${e}/${s}`);
        } catch (x) {}
      } else set.add(e);
    }
  }
  return [...set];
}

function closeNames(name, candidates) {
  const max = name.length <= 4 ? 1 : name.length <= 8 ? 2 : 3;
  return candidates
    .filter((c) => Math.abs(c.length - name.length) <= max)
    .map((c) => [editDistance(name.toLowerCase(), c.toLowerCase()), c])
    .filter(([dist, c]) => dist <= max && c !== name)
    .sort((x, y) => x[0] - y[0] || (x[1] < y[1] ? -1 : 1))
    .slice(0, 3)
    .map(([, c]) => c);
}

function isLoopback(addr) {
  return typeof addr === 'string' && (addr.startsWith('127.') || addr === '::1' || addr === 'localhost' || addr.startsWith('::ffff:127.'));
}

function outsideWritable(p) {
  if (typeof p !== 'string' || !p) return false;
  const abs = path.resolve(process.cwd(), p);
  return !WRITABLE.some((w) => abs === w || abs.startsWith(w.endsWith('/') ? w : w + '/'));
}

const WRITE_SYSCALLS = new Set(['open', 'mkdir', 'rmdir', 'unlink', 'rename', 'copyfile', 'symlink', 'link', 'chmod', 'chown', 'lchown', 'utime', 'futime', 'lutime', 'write', 'mkdtemp', 'cp', 'rm', 'truncate', 'ftruncate']);

function hintFor(err) {
  const seen = new Set();
  const chain = [];
  const visit = (e) => {
    if (e === null || typeof e !== 'object' || seen.has(e) || chain.length > 8) return;
    seen.add(e);
    chain.push(e);
    if (Array.isArray(e.errors)) e.errors.forEach(visit);
    visit(e.cause);
  };
  visit(err);
  for (const e of chain) {
    const msg = typeof e.message === 'string' ? e.message : '';
    if (e.code === 'MODULE_NOT_FOUND' || e.code === 'ERR_MODULE_NOT_FOUND') {
      const m = /Cannot find (?:module|package) '([^']+)'/.exec(msg);
      if (!m) continue;
      const spec = m[1];
      if (spec.startsWith('.') || spec.startsWith('/')) {
        if (e.requireStack === undefined || (Array.isArray(e.requireStack) && e.requireStack.every((f) => f.includes('<cell')))) {
          return `'${spec}' was not found; relative paths resolve from the working directory ${process.cwd()}`;
        }
        continue;
      }
      const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
      let hint = `module '${name}' is not installed in this sandbox's image; node's built-in modules are available`;
      const close = closeNames(name, availableModules());
      if (close.length) hint += `; close names: ${close.join(', ')}`;
      return hint;
    }
    if (NETWORK === 'none') {
      const code = e.code;
      if (['ENETUNREACH', 'EHOSTUNREACH', 'ENETDOWN', 'EAI_AGAIN', 'ENOTFOUND', 'EAI_NONAME', 'EAI_FAIL'].includes(code) || (code === 'ECONNREFUSED' && e.address && !isLoopback(e.address))) {
        if (!(code === 'ENOTFOUND' && isLoopback(e.hostname))) return "the network is disabled by this sandbox's policy (network: none); only loopback works";
      }
    }
    if ((e.code === 'EROFS' || ((e.code === 'EACCES' || e.code === 'EPERM') && WRITE_SYSCALLS.has(e.syscall))) && outsideWritable(e.path)) {
      return `'${path.resolve(process.cwd(), e.path)}' is read-only in this sandbox; write under ${WRITABLE.join(' or ')}`;
    }
    if (MEMORY_LIMIT && (e.code === 'ERR_MEMORY_ALLOCATION_FAILED' || /Array buffer allocation failed|Cannot allocate memory/.test(msg))) {
      return `the sandbox's memory limit is ${fmtSize(MEMORY_LIMIT)}`;
    }
    if (e.name === 'SyntaxError' && /Cannot use import statement outside a module|Unexpected token 'export'/.test(msg)) {
      return "cells run as scripts, not ES modules: use require('x') or await import('x')";
    }
  }
  return undefined;
}

function fmtSize(n) {
  const units = [['GiB', 1 << 30], ['MiB', 1 << 20], ['KiB', 1 << 10]];
  for (const [u, v] of units) if (n >= v && n % v === 0) return `${n / v} ${u}`;
  for (const [u, v] of units) if (n >= v) return `${(n / v).toFixed(1)} ${u}`;
  return `${n} bytes`;
}

function errorContent(err, files) {
  let content;
  if (isErrorLike(err)) {
    let ename = 'Error';
    let evalue = '';
    try {
      ename = String(err.name || (err.constructor && err.constructor.name) || 'Error');
      evalue = String(err.message);
      if (err.code === 'MODULE_NOT_FOUND' && Array.isArray(err.requireStack) && err.requireStack.every((f) => f === cellFile)) evalue = evalue.split('\n')[0];
    } catch (e) {}
    let tb;
    try {
      tb = traceback(err, files);
    } catch (e) {
      tb = [];
    }
    content = { ename, evalue, traceback: tb };
    let hint;
    try {
      hint = hintFor(err);
    } catch (e) {}
    if (hint) content.hint = hint;
  } else {
    content = { ename: 'Uncaught', evalue: inspect(err, INSPECT), traceback: [] };
  }
  return content;
}

function errorLines(content) {
  const tb = content.traceback.length ? content.traceback.join('\n') : `${content.ename}: ${content.evalue}`;
  return tb + (content.hint ? `\nhint: ${content.hint}` : '') + '\n';
}

// ---------------------------------------------------------------------------
// Globals for user code (the kernel runs cells in node's main context; see docs).

const cwd = process.cwd();
const cellFile = path.join(cwd, '<cell>');
const userRequire = Module.createRequire(cellFile);
const userModule = { id: '<cell>', filename: cellFile, path: cwd, exports: {}, require: userRequire, loaded: true, children: [], paths: userRequire.resolve.paths('x') || [] };

function display(obj, opts) {
  let data;
  if (opts && opts.raw) {
    if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) throw new TypeError('display(bundle, {raw: true}) expects an object mapping MIME types to values');
    data = {};
    for (const [k, v] of Object.entries(obj)) {
      if (k === 'application/json' || k.endsWith('+json')) data[k] = JSONparse(JSONstringify(v === undefined ? null : v));
      else data[k] = typeof v === 'string' ? v : String(v);
    }
  } else {
    data = mimeBundle(obj);
  }
  send('display_data', { data, metadata: {} }, lastReq ? lastReq.id : undefined);
}

// Timers started by a cell are remembered so that the cell can wait for them briefly.
const timers = new Map(); // Timeout -> {seq, due, interval}
function delay(ms) {
  ms = Number(ms);
  return ms >= 1 && ms <= 2147483647 ? ms : 1;
}
function trackedSetTimeout(cb, ms, ...args) {
  if (typeof cb !== 'function') return realSetTimeout(cb, ms, ...args);
  const t = realSetTimeout(function () {
    timers.delete(t);
    return Reflect.apply(cb, this, arguments);
  }, ms, ...args);
  timers.set(t, { seq: cellSeq, due: now() + delay(ms), interval: false });
  return t;
}
function trackedSetInterval(cb, ms, ...args) {
  const t = realSetInterval(cb, ms, ...args);
  timers.set(t, { seq: cellSeq, due: now() + delay(ms), interval: true });
  return t;
}
function untrack(t) {
  if (t === null || t === undefined) return;
  if (typeof t === 'object') return void timers.delete(t);
  for (const k of timers.keys()) {
    if (String(+k) === String(t)) timers.delete(k);
  }
}
function trackedClearTimeout(t) {
  untrack(t);
  return realClearTimeout(t);
}
function trackedClearInterval(t) {
  untrack(t);
  return realClearInterval(t);
}
for (const [w, r] of [[trackedSetTimeout, realSetTimeout], [trackedSetInterval, realSetInterval]]) {
  if (r[util.promisify.custom]) w[util.promisify.custom] = r[util.promisify.custom];
  Object.defineProperty(w, 'name', { value: r.name });
}
function pendingTimers(seq, deadline) {
  for (const [t, info] of timers) {
    if (t._destroyed) {
      timers.delete(t);
      continue;
    }
    if (info.seq !== seq) continue;
    if (typeof t.hasRef === 'function' && !t.hasRef()) continue;
    if (info.interval || info.due <= deadline) return true;
  }
  return false;
}

function installGlobals() {
  const define = (name, value) => Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
  define('console', userConsole);
  define('require', userRequire);
  define('module', userModule);
  define('exports', userModule.exports);
  define('__filename', cellFile);
  define('__dirname', cwd);
  define('display', display);
  define('setTimeout', trackedSetTimeout);
  define('setInterval', trackedSetInterval);
  define('clearTimeout', trackedClearTimeout);
  define('clearInterval', trackedClearInterval);
  Object.defineProperty(process, 'stdout', { get: () => userStdout, configurable: true, enumerable: true });
  Object.defineProperty(process, 'stderr', { get: () => userStderr, configurable: true, enumerable: true });
  process.exit = function exit(code) {
    throw new ExitSignal(code === undefined ? (process.exitCode ?? 0) : code);
  };
}

// ---------------------------------------------------------------------------
// Uncaught errors: the running request's error, or a stderr line when idle.

function uncaught(err, what) {
  if (current && current.active) {
    current.fail(err);
    return;
  }
  if (err instanceof ExitSignal) return;
  const content = errorContent(err, []);
  emitStream('stderr', `${what}: ${errorLines(content)}`);
}
process.on('uncaughtException', (err) => uncaught(err, 'Uncaught'));
// SIGINT interrupts the running request: synchronous cell code through breakOnSigint, a cell
// or call that is waiting through this handler. Between requests it is ignored.
process.on('SIGINT', () => {
  if (current && current.active) current.fail(new Interrupt());
});
process.on('unhandledRejection', (reason) => uncaught(reason, 'Unhandled promise rejection'));

// ---------------------------------------------------------------------------
// Requests.

let executionCount = 0;
let failed = false;

function beginRequest(id) {
  let reject;
  const failedP = new Promise((_, r) => {
    reject = r;
  });
  failedP.catch(() => {});
  flushStream();
  const req = { id, truncated: { stdout: false, stderr: false }, active: true, failed: failedP, fail: (e) => reject({ uncaught: e }) };
  if (OUTPUT_PER_REQUEST) outputUsed = 0; // a session's kernel: the cap holds per request
  current = req;
  lastReq = req;
  return req;
}

function endRequest(req) {
  req.active = false;
  if (current === req) current = null;
}

function race(p, req) {
  return Promise.race([p, req.failed]);
}

async function onExecute(msg) {
  const c = msg.content && typeof msg.content === 'object' ? msg.content : {};
  const id = msg.id;
  const stopOnError = c.stop_on_error !== false;
  if (failed && stopOnError) {
    send('execute_reply', { status: 'aborted', execution_count: executionCount, stdout_truncated: false, stderr_truncated: false }, id);
    return;
  }
  if (!stopOnError) failed = false; // a cell sent with stop_on_error false ends the aborting
  if (typeof c.code !== 'string') {
    send('error', { ename: 'ProtocolError', evalue: 'execute_request needs content.code (a string)', traceback: [] }, id);
    send('execute_reply', { status: 'error', execution_count: executionCount, stdout_truncated: false, stderr_truncated: false }, id);
    return;
  }
  if (!setGlobals(c.globals)) {
    send('error', { ename: 'ProtocolError', evalue: 'execute_request: content.globals must be an object', traceback: [] }, id);
    send('execute_reply', { status: 'error', execution_count: executionCount, stdout_truncated: false, stderr_truncated: false }, id);
    return;
  }
  if (LINT_REFUSED) {
    failed = true;
    send('error', { ...LINT_REFUSED, hint: LINT_REFUSED.evalue }, id);
    send('execute_reply', { status: 'error', execution_count: executionCount, stdout_truncated: false, stderr_truncated: false }, id);
    return;
  }
  executionCount++;
  cellSeq = executionCount;
  const seq = cellSeq;
  const filename = `<cell ${executionCount}>`;
  const until = callDeadline(c);
  const req = beginRequest(id);
  let status = 'ok';
  let errContent = null;
  try {
    const run = prepareCell(c.code, filename);
    let value = run();
    if (isThenable(value)) value = await race(Promise.resolve(value), req);
    syncRaw();
    if (value !== undefined) send('execute_result', { execution_count: executionCount, data: mimeBundle(value), metadata: {} }, id);
    // the cell's own timers that are due soon
    const deadline = now() + TIMER_WAIT_MS;
    while (pendingTimers(seq, deadline) && now() < deadline) {
      await race(new Promise((r) => realSetTimeout(r, Math.max(1, Math.min(10, deadline - now())))), req);
    }
    await race(new Promise((r) => realSetImmediate(r)), req);
  } catch (e) {
    const err = e && typeof e === 'object' && 'uncaught' in e ? e.uncaught : e;
    if (err instanceof ExitSignal) {
      const code = Number(err.code) || 0;
      if (code !== 0) {
        status = 'error';
        errContent = { ename: 'ProcessExit', evalue: `process.exit(${code}) was called`, traceback: [], hint: 'process.exit() ends the cell here; the kernel and its globals stay alive' };
      }
    } else if (err instanceof Interrupt || (err && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED')) {
      status = 'error';
      errContent = interruptError(until);
    } else {
      status = 'error';
      errContent = errorContent(err, [filename]);
    }
  }
  syncRaw();
  if (errContent) send('error', errContent, id);
  endRequest(req);
  if (status === 'error' && stopOnError) failed = true;
  send('execute_reply', { status, execution_count: executionCount, stdout_truncated: req.truncated.stdout, stderr_truncated: req.truncated.stderr }, id);
  if (rawFds && !drain) realSetImmediate(ensureDrain);
}

// Why a value cannot be sent as JSON faithfully (BigInt, NaN or an infinity, a cycle, a
// function or symbol as the value itself), with where it is; null when it can.
function jsonProblem(value) {
  const seen = new Set();
  const walk = (v, at, depth) => {
    if (typeof v === 'bigint') return `a BigInt at ${at}`;
    if (typeof v === 'number' && !Number.isFinite(v)) return `${v} at ${at}`;
    if ((typeof v === 'function' || typeof v === 'symbol') && at === '$') return `a ${typeof v}`;
    if (v === null || typeof v !== 'object' || depth > 200) return null;
    if (typeof v.toJSON === 'function') return null;
    if (seen.has(v)) return `a cycle at ${at}`;
    seen.add(v);
    if (v instanceof Map || v instanceof Set) return `a ${v.constructor.name} at ${at} (use an object or an array)`;
    const keys = Array.isArray(v) ? v.keys() : Object.keys(v);
    for (const k of keys) {
      const r = walk(v[k], Array.isArray(v) ? `${at}[${k}]` : /^[A-Za-z_$][\w$]*$/.test(k) ? `${at}.${k}` : `${at}[${JSONstringify(k)}]`, depth + 1);
      if (r) return r;
    }
    seen.delete(v);
    return null;
  };
  try {
    return walk(value, '$', 0);
  } catch (e) {
    return null;
  }
}

// Parameter names of a function, from its source; null when they cannot be told.
function paramNames(fn) {
  let src;
  try {
    src = Function.prototype.toString.call(fn);
  } catch (e) {
    return null;
  }
  let toks;
  try {
    toks = lex(src);
  } catch (e) {
    return null;
  }
  let open = toks.findIndex((t) => isP(t, '(') || isP(t, '=>') || isP(t, '{'));
  if (open < 0) return null;
  if (!isP(toks[open], '(')) return toks[open - 1] && toks[open - 1].t === 'name' ? [toks[open - 1].v] : null;
  const close = toks[open].match;
  if (close === undefined) return null;
  const names = [];
  let expect = true;
  for (let k = open + 1; k < close; k++) {
    const t = toks[k];
    if (t.d !== toks[open].d + 1) continue;
    if (isP(t, ',')) {
      expect = true;
      continue;
    }
    if (!expect) continue;
    expect = false;
    if (isP(t, '...')) return names; // a rest parameter takes the rest
    if (t.t !== 'name') return null; // destructured
    names.push(t.v);
  }
  return names;
}

class CallError extends Error {
  constructor(name, message, hint) {
    super(message);
    this.name = name;
    this.hint = hint;
  }
}

function resolveTarget(mod, target, filename) {
  const parts = target.split('.');
  if (parts.some((p) => !/^[$_\p{ID_Start}][$\u200c\u200d\p{ID_Continue}]*$/u.test(p)) || parts.length > 2) {
    throw new CallError('FunctionNotFound', `'${target}' is not a function name or Class.method`);
  }
  const exp = mod.exports;
  let root;
  if (exp !== null && (typeof exp === 'object' || typeof exp === 'function') && Object.prototype.hasOwnProperty.call(exp, parts[0])) root = exp[parts[0]];
  else if (typeof exp === 'function' && exp.name === parts[0]) root = exp;
  else if (typeof mod.__wardLookup === 'function') {
    try {
      root = mod.__wardLookup(parts[0]);
    } catch (e) {
      root = undefined;
    }
  }
  const available = () => {
    const names = exp && (typeof exp === 'object' || typeof exp === 'function') ? Object.keys(exp) : [];
    return names.length ? `; exported: ${names.join(', ')}` : '';
  };
  if (root === undefined) throw new CallError('FunctionNotFound', `no function or class '${parts[0]}' in ${filename}${available()}`);
  if (parts.length === 1) {
    if (typeof root !== 'function') throw new CallError('FunctionNotFound', `'${parts[0]}' in ${filename} is not a function (it is ${root === null ? 'null' : typeof root})`);
    return { fn: root, self: undefined };
  }
  const m = parts[1];
  if (typeof root === 'function' && root.prototype && typeof root.prototype[m] === 'function' && !Object.prototype.hasOwnProperty.call(root, m)) {
    const self = new root();
    return { fn: self[m], self };
  }
  if (root !== null && (typeof root === 'object' || typeof root === 'function') && typeof root[m] === 'function') return { fn: root[m], self: root };
  throw new CallError('FunctionNotFound', `'${parts[0]}' in ${filename} has no method '${m}'`);
}

function callArgs(fn, args, target) {
  if (args === undefined || args === null) {
    if (fn.length > 0) throw new CallError('ArgumentError', `${target} expects ${fn.length} argument(s), got none`);
    return [];
  }
  if (Array.isArray(args)) {
    if (args.length < fn.length) throw new CallError('ArgumentError', `${target} expects at least ${fn.length} argument(s), got ${args.length}`);
    return args;
  }
  if (typeof args !== 'object' || fn.length <= 1) return [args];
  // several parameters and an object: match the keys to the parameter names
  const names = paramNames(fn);
  if (!names) throw new CallError('ArgumentError', `${target} takes ${fn.length} parameters; pass args as a JSON array`);
  const keys = Object.keys(args);
  const unknown = keys.filter((k) => !names.includes(k));
  const missing = names.slice(0, fn.length).filter((n) => !keys.includes(n));
  if (unknown.length || missing.length) {
    const parts = [];
    if (missing.length) parts.push(`missing ${missing.join(', ')}`);
    if (unknown.length) parts.push(`unexpected ${unknown.join(', ')}`);
    throw new CallError('ArgumentError', `${target}(${names.join(', ')}): ${parts.join('; ')}`);
  }
  let n = names.length;
  while (n > 0 && !keys.includes(names[n - 1])) n--;
  return names.slice(0, n).map((k) => args[k]);
}

// A request's globals (runners/PROTOCOL.md): properties of globalThis set
// before the code runs, outside it (no line of the cell moves). False when
// they are not an object.
function setGlobals(g) {
  if (g === undefined || g === null) return true;
  if (typeof g !== 'object' || Array.isArray(g)) return false;
  for (const k of Object.keys(g)) globalThis[k] = g[k];
  return true;
}

async function onCall(msg) {
  const c = msg.content && typeof msg.content === 'object' ? msg.content : {};
  const id = msg.id;
  const reply = (content) => send('call_reply', content, id);
  const fail = (content) => reply({ status: 'error', error: content });
  if (typeof c.code !== 'string' || typeof c.function !== 'string' || !c.function) {
    fail({ ename: 'ProtocolError', evalue: 'call_request needs content.code and content.function (strings)', traceback: [] });
    return;
  }
  if (!setGlobals(c.globals)) {
    fail({ ename: 'ProtocolError', evalue: 'call_request: content.globals must be an object', traceback: [] });
    return;
  }
  const base = typeof c.filename === 'string' && c.filename ? path.basename(c.filename) : 'tool.js';
  const filename = path.join(cwd, base);
  const req = beginRequest(id);
  const files = [filename];
  try {
    let value;
    try {
      const mod = { id: filename, filename, path: cwd, exports: {}, loaded: false, children: [] };
      const req2 = Module.createRequire(filename);
      mod.require = req2;
      const src = c.code + '\n;module.__wardLookup = function (n) { return eval(n); };\n';
      const opts = { filename };
      if (importDyn) opts.importModuleDynamically = importDyn;
      remember(filename, c.code, src);
      const fn = vm.compileFunction(src, ['exports', 'require', 'module', '__filename', '__dirname'], opts);
      fn.call(mod.exports, mod.exports, req2, mod, filename, cwd);
      mod.loaded = true;
      const { fn: target, self } = resolveTarget(mod, c.function, base);
      const argv = callArgs(target, c.args, c.function);
      value = Reflect.apply(target, self, argv);
      if (isThenable(value)) value = await race(Promise.resolve(value), req);
    } catch (e) {
      const err = e && typeof e === 'object' && 'uncaught' in e ? e.uncaught : e;
      if (err instanceof CallError) {
        syncRaw();
        fail({ ename: err.name, evalue: err.message, traceback: [] });
      } else if (err instanceof ExitSignal) {
        syncRaw();
        fail({ ename: 'ProcessExit', evalue: `process.exit(${Number(err.code) || 0}) was called`, traceback: [] });
      } else if (err instanceof Interrupt) {
        syncRaw();
        fail({ ...INTERRUPT, evalue: 'the call was interrupted (SIGINT)', traceback: [] });
      } else {
        syncRaw();
        fail(errorContent(err, files));
      }
      return;
    }
    let json;
    let why = jsonProblem(value);
    if (why === null) {
      try {
        json = JSONstringify(value === undefined ? null : value);
        if (json === undefined) why = `a ${typeof value} is not JSON`;
      } catch (e) {
        why = e.message;
      }
    }
    if (why === null && OUTPUT_LIMIT !== null && Buffer.byteLength(json, 'utf8') > OUTPUT_LIMIT) {
      why = `its JSON is ${Buffer.byteLength(json, 'utf8')} bytes, more than output_limit (${OUTPUT_LIMIT})`;
    }
    syncRaw();
    if (why !== null) {
      fail({ ename: 'SerializationError', evalue: `the return value of ${c.function} is not JSON: ${why}`, traceback: [] });
      return;
    }
    reply({ status: 'ok', value: JSONparse(json) });
  } finally {
    endRequest(req);
  }
}

async function handleLine(line, lineNo) {
  let msg;
  try {
    msg = JSONparse(line);
  } catch (e) {
    send('error', { ename: 'ProtocolError', evalue: `request line ${lineNo} is not JSON: ${e.message}`, traceback: [] });
    return;
  }
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg) || typeof msg.msg_type !== 'string') {
    send('error', { ename: 'ProtocolError', evalue: `request line ${lineNo} is not a JSON object with a msg_type`, traceback: [] }, msg && typeof msg === 'object' ? msg.id : undefined);
    return;
  }
  try {
    switch (msg.msg_type) {
      case 'execute_request':
        return await onExecute(msg);
      case 'call_request':
        return await onCall(msg);
      case 'shutdown_request':
        syncRaw();
        send('shutdown_reply', {}, msg.id);
        realExit(0);
        return;
      default:
        send('error', { ename: 'ProtocolError', evalue: `unknown msg_type '${String(msg.msg_type).slice(0, 100)}'`, traceback: [] }, msg.id);
    }
  } catch (e) {
    // a bug in the kernel: say so rather than hang
    try {
      send('error', { ename: 'KernelError', evalue: String((e && e.stack) || e), traceback: [] }, msg.id);
    } catch (e2) {}
  }
}

// Requests are handled one at a time, in order; at EOF the queued ones finish, then exit 0.
const queue = [];
let busy = false;
let eof = false;
let lineNo = 0;

async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const line = queue.shift();
    await handleLine(line, ++lineNo);
  }
  busy = false;
  if (eof) {
    syncRaw();
    flushStream();
    realExit(0);
  }
}

function requestStream() {
  if (fdMode === 'shared') return process.stdin;
  const st = fstatSync(reqFd);
  if (st.isFIFO() || st.isSocket()) return new net.Socket({ fd: reqFd, readable: true, writable: false });
  if (st.isCharacterDevice() && require('tty').isatty(reqFd)) return new (require('tty').ReadStream)(reqFd);
  return fs.createReadStream(null, { fd: reqFd, autoClose: false });
}

function startReader() {
  const stream = requestStream();
  const decoder = new StringDecoder('utf8');
  let buf = '';
  stream.on('data', (chunk) => {
    buf += typeof chunk === 'string' ? chunk : decoder.write(chunk);
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).replace(/\r$/, '');
      buf = buf.slice(i + 1);
      if (line.trim()) queue.push(line);
      else lineNo++;
    }
    pump();
  });
  const done = () => {
    if (eof) return;
    eof = true;
    buf += decoder.end();
    if (buf.trim()) queue.push(buf);
    buf = '';
    pump();
  };
  stream.on('end', done);
  stream.on('close', done);
  stream.on('error', done);
}

// ---------------------------------------------------------------------------

if (rawFds) hookSubprocesses();
installGlobals();
startReader();
send('status', { execution_state: 'idle', language: 'node', language_version: process.versions.node });
