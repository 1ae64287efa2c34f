"""The kernel's output side: the protocol channel and sys.stdout/sys.stderr.

Every message leaves through Channel, one whole JSON line at a time, under
one lock. It must never let user output reach the protocol fd except inside
a `stream` message, and never block the user's code on the output cap.
"""

import _signal
import codecs
import io
import os
import select
import threading
import time

from _ward_kernel import wire

CHUNK = 1 << 18              # characters of stream text per message
DRAIN_MAX = 1 << 22          # bytes read from one pipe per drain: a flood cannot stall a reply
BATCH = 0.05                 # seconds text may wait, to join what follows it in one message


class Channel:
    """The protocol output and the two output streams, behind one lock.

    Python-level writes (sys.stdout/sys.stderr) are sent by the writing
    thread; fd-level output (C code, subprocesses) goes through a pipe per fd,
    drained by a reader thread. Before any Python-level text or message goes
    out, the pipes are drained too, so everything keeps the order it was
    written in. Text is sent a line at a time, but lines that come faster than
    one per BATCH are joined into one message (like ipykernel's flush
    interval): a print loop does not become a message per line.
    """

    def __init__(self, output_limit):
        self.lock = threading.RLock()
        self.parent = None
        self.limit = output_limit
        self.used = 0
        self.per_request = False
        self.truncated = {"stdout": False, "stderr": False}
        self.pending, self.pending_name, self.pending_len, self.pending_since = [], None, 0, 0.0
        self.last_sent = 0.0
        self.busy = self.child = self.writing = self.interrupted = False
        self.deferred = []
        self.main = self.writer = threading.get_ident()
        # os.dup gives close-on-exec copies: subprocesses never see the protocol.
        self.proto = os.dup(1)
        self.requests = os.dup(0)
        try:
            null = os.open(os.devnull, os.O_RDONLY)
        except OSError:
            null, w = os.pipe()
            os.close(w)
        os.dup2(null, 0)
        os.close(null)
        self.pipes = {}
        for fd, name in ((1, "stdout"), (2, "stderr")):
            r, w = os.pipe()
            os.dup2(w, fd)           # inheritable: children write here
            os.close(w)
            os.set_blocking(r, False)
            self.pipes[r] = (name, codecs.getincrementaldecoder("utf-8")("replace"))
        self.check = select.poll()   # used under the lock, to drain only pipes that hold data
        for r in self.pipes:
            self.check.register(r, select.POLLIN)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        os.register_at_fork(before=self._before_fork, after_in_parent=self._after_fork_parent,
                            after_in_child=self._after_fork_child)
        threading.Thread(target=self._reader, name="ward-output", daemon=True).start()

    # -- the reader thread: fd-level output, and text that waited BATCH
    def _reader(self):
        try:                         # SIGINT goes to the main thread, where it interrupts code
            _signal.pthread_sigmask(_signal.SIG_BLOCK, [_signal.SIGINT])
        except (AttributeError, OSError, ValueError):
            pass
        poller, registered = select.poll(), set()
        for fd in [self.wake_r, *self.pipes]:
            poller.register(fd, select.POLLIN)
            registered.add(fd)
        while True:
            try:
                events = poller.poll(BATCH * 1000 if self.busy or self.pending else None)
                with self.lock:
                    for fd, _ in events:
                        if fd == self.wake_r:
                            self._read_quietly(fd)
                        elif fd in self.pipes:
                            self._drain(fd)
                    for fd in registered - set(self.pipes) - {self.wake_r}:
                        poller.unregister(fd)
                        registered.discard(fd)
                        os.close(fd)
                    if self.pending and time.monotonic() - self.pending_since >= BATCH:
                        self._flush_pending()
            except Exception:
                time.sleep(BATCH)    # never spin; the main thread drains too

    @staticmethod
    def _read_quietly(fd):
        try:
            os.read(fd, 4096)
        except OSError:
            pass

    def _drain(self, fd):
        name, decoder = self.pipes[fd]
        parts, total = [], 0
        while total < DRAIN_MAX:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:             # every writer closed it: the reader thread closes it
                parts.append(decoder.decode(b"", True))
                del self.pipes[fd]
                self.check.unregister(fd)
                break
            parts.append(decoder.decode(data))
            total += len(data)
            if len(data) < 65536:    # the pipe was empty after this read
                break
        text = "".join(parts)
        if text:
            self._add(name, text)

    def _add(self, name, text):
        """Queue text behind what came before it: text that ends a line goes out at once
        unless another went out less than BATCH ago; the reader thread sends
        what waited BATCH."""
        if self.pending and self.pending_name != name:
            self._flush_pending()
        now = time.monotonic()
        if not self.pending:
            self.pending_since = now
        self.pending.append(text)
        self.pending_name, self.pending_len = name, self.pending_len + len(text)
        if self.pending_len >= CHUNK or (text.endswith("\n") and now - self.last_sent >= BATCH):
            self._flush_pending()

    def _drain_all(self):
        if self.pipes:
            for fd, _ in self.check.poll(0):
                if fd in self.pipes:
                    self._drain(fd)

    def _flush_pending(self):
        if self.pending:
            text, name = "".join(self.pending), self.pending_name
            self.pending, self.pending_len = [], 0
            self.last_sent = time.monotonic()
            self._emit(name, text)

    def _emit(self, name, text):
        if self.limit is not None:
            room = self.limit - self.used
            data = text.encode("utf-8", "replace")
            if len(data) > room:
                self.truncated[name] = True
                text = data[:max(room, 0)].decode("utf-8", "ignore")
                self.used = self.limit
            else:
                self.used += len(data)
        for i in range(0, len(text), CHUNK):
            self._write("stream", {"name": name, "text": text[i:i + CHUNK]})

    def _write(self, msg_type, content):
        msg = {"msg_type": msg_type, "content": content, "time": time.time()}
        if self.parent is not None:
            msg["parent_id"] = self.parent
        try:
            line = wire.dumps(msg)
        except (TypeError, ValueError, RecursionError) as e:
            msg.update(msg_type="error", content={"ename": "KernelError", "traceback": [],
                       "evalue": "a %s message could not be encoded: %s" % (msg_type, e)})
            line = wire.dumps(msg)
        data = line.encode("utf-8", "replace") + b"\n"
        if self.writing:             # a signal handler printed in the middle of a line
            self.deferred.append(data)
            return
        self.writing, self.writer = True, threading.get_ident()
        try:
            self._write_all(data)
            while self.deferred:
                self._write_all(self.deferred.pop(0))
        finally:
            self.writing = False
        if self.interrupted and self.writer == self.main:
            self.interrupted = False
            raise KeyboardInterrupt  # held back while the line was half written

    def interrupt(self):
        """SIGINT in the user's code: KeyboardInterrupt now, or right after
        the protocol line the main thread is writing, never in its middle."""
        if self.writing and self.writer == self.main:
            self.interrupted = True
        else:
            raise KeyboardInterrupt

    def _write_all(self, data):
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.proto, view):]
            except OSError:          # the supervisor is gone: nobody is left to tell
                os._exit(1)

    def _wake(self):
        try:
            os.write(self.wake_w, b"!")
        except OSError:
            pass

    # -- the interface used by the kernel and the writers
    def text(self, name, s):
        """Python-level output: sent when it ends a line (joined with the lines
        that follow when they come fast), or at the latest after BATCH."""
        if self.child:
            return self._child_write(name, s)
        with self.lock:
            self._drain_all()        # what reached the pipes before this call goes first
            self._add(name, s)
            if self.pending and not self.busy:
                self._wake()         # a thread writing between cells: the reader must time it

    def message(self, msg_type, content):
        with self.lock:
            if not self.child:
                self.flush()
                self._write(msg_type, content)

    def flush(self):
        with self.lock:
            if not self.child:
                self._drain_all()
                self._flush_pending()

    def begin(self, parent):
        with self.lock:
            self.flush()             # leftovers still belong to the previous request
            self.parent = parent
            self.truncated = {"stdout": False, "stderr": False}
            if self.per_request:
                self.used = 0

    def set_busy(self, busy):
        self.busy = busy
        if busy:
            self._wake()

    # -- fork: the child writes raw bytes to fds 1 and 2, which the parent drains
    def _before_fork(self):
        self.lock.acquire()
        self._flush_pending()

    def _after_fork_parent(self):
        self.lock.release()

    def _after_fork_child(self):
        self.lock = threading.RLock()
        self.child = True
        self.pending, self.pending_len = [], 0
        for fd in (self.proto, self.requests, self.wake_r, self.wake_w, *self.pipes):
            try:
                os.close(fd)
            except OSError:
                pass

    @staticmethod
    def _child_write(name, s):
        view = memoryview(s.encode("utf-8", "replace"))
        while view:
            try:
                view = view[os.write(1 if name == "stdout" else 2, view):]
            except OSError:
                return


class Writer(io.TextIOBase):
    """sys.stdout / sys.stderr: every write becomes `stream` text, in order."""

    encoding, errors = "utf-8", "strict"

    def __init__(self, channel, stream, fd):
        super().__init__()
        self._channel, self._stream, self._fd = channel, stream, fd
        self.buffer = BinaryWriter(self)

    name = property(lambda self: "<%s>" % self._stream)
    line_buffering = property(lambda self: True)

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        if s:
            self._channel.text(self._stream, s)
        return len(s)

    def flush(self):
        if not self._channel.child:
            self._channel.flush()

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return self._fd

    def reconfigure(self, **_options):
        """Accepted and ignored: the streams are always UTF-8 text."""


class BinaryWriter(io.BufferedIOBase):
    """sys.stdout.buffer: bytes are decoded as UTF-8 (invalid bytes become U+FFFD)."""

    def __init__(self, text_writer):
        super().__init__()
        self._text = text_writer
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(self, b):
        data = bytes(b)
        s = self._decoder.decode(data)
        if s:
            self._text.write(s)
        return len(data)

    def flush(self):
        self._text.flush()

    def writable(self):
        return True

    def fileno(self):
        return self._text.fileno()

