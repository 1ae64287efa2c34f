"""ward.AsyncSandbox and the async one-shots against a real daemon:
concurrency, cancellation of tasks, and the same errors as the sync API."""
import asyncio
import io
import os
import time
import unittest

import ward
from support import KEY_SMALL, NEEDS_DAEMON, cgroup_missing, killed_count, raw, running_oneshots, session_status


SLOW = "print('started', flush=True)\nimport time\ntime.sleep(60)"


async def poll(what, pred, limit=10.0):
    end = time.monotonic() + limit
    while not await asyncio.to_thread(pred):
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {limit}s waiting for {what}")
        await asyncio.sleep(0.02)


@NEEDS_DAEMON
class TestAsync(unittest.IsolatedAsyncioTestCase):
    async def test_session(self):
        """state persists; commands, files, list and connect"""
        async with ward.AsyncSandbox(ttl=120) as sbx:
            await sbx.run_code("x = 41")
            self.assertEqual((await sbx.run_code("x + 1")).text, "42")
            ex = await sbx.run_code("1/0")
            self.assertEqual(ex.error.name, "ZeroDivisionError")
            r = await sbx.commands.run("echo $A", envs={"A": "b"})
            self.assertEqual(r.stdout, "b\n")
            with self.assertRaises(ward.CommandExitError):
                await sbx.commands.run("exit 2")
            await sbx.files.write("f.txt", "data")
            big = os.urandom(300 << 10)
            await sbx.files.write("big", io.BytesIO(big))
            self.assertEqual(await sbx.files.read("f.txt"), "data")
            chunks = [c async for c in await sbx.files.read("big", format="stream")]
            self.assertEqual(b"".join(chunks), big)
            self.assertEqual(sorted(e.name for e in await sbx.files.list()), ["big", "f.txt"])
            await sbx.files.remove("f.txt")
            self.assertFalse(await sbx.files.exists("f.txt"))
            self.assertIn(sbx.sandbox_id, [s.sandbox_id for s in await ward.AsyncSandbox.list()])
            other = await ward.AsyncSandbox.connect(sbx.sandbox_id)
            self.assertEqual((await other.run_code("x")).text, "41")
            await other.close()
        self.assertEqual(raw("GET", f"/v1/sessions/{sbx.sandbox_id}")[0], 404)

    async def test_background(self):
        sbx = await ward.AsyncSandbox.create()
        try:
            h = await sbx.commands.run("sleep 0.2; echo done", background=True)
            self.assertEqual((await h.wait()).stdout, "done\n")
            h = await sbx.commands.run("sleep 30", background=True)
            self.assertTrue(await h.kill())
            with self.assertRaises(ward.KilledError):
                await h.wait(timeout=10)
        finally:
            self.assertTrue(await ward.AsyncSandbox.kill(sbx.sandbox_id))
        self.assertFalse(await sbx.kill())

    async def test_ten_oneshots_at_once(self):
        """10 one-shots at once: each gets its own output, and they overlap"""
        code = "import time\ntime.sleep(1)\nprint('n={}')"
        t0 = time.monotonic()
        exs = await asyncio.gather(*[ward.run_async(code.format(i)) for i in range(10)])
        took = time.monotonic() - t0
        self.assertEqual([e.stdout for e in exs], [f"n={i}\n" for i in range(10)])
        self.assertEqual(len({e.execution_id for e in exs}), 10)
        self.assertLess(took, 8.0, "the ten ran one after another (10 s or more)")

    async def test_ten_sessions_at_once(self):
        """10 sessions, each running a call, all at once"""
        sbxs = await asyncio.gather(*[ward.AsyncSandbox.create(ttl=60) for _ in range(10)])
        try:
            t0 = time.monotonic()
            exs = await asyncio.gather(*[s.run_code(f"import time\ntime.sleep(1)\n{i} * 2")
                                         for i, s in enumerate(sbxs)])
            took = time.monotonic() - t0
            self.assertEqual([e.text for e in exs], [str(i * 2) for i in range(10)])
            self.assertLess(took, 8.0, "the ten calls ran one after another (10 s or more)")
        finally:
            await asyncio.gather(*[s.kill() for s in sbxs])

    async def test_task_cancel(self):
        """cancelling the task cancels the call on the server"""
        before = await asyncio.to_thread(killed_count)
        async with ward.AsyncSandbox() as sbx:
            started = asyncio.Event()
            task = asyncio.create_task(sbx.run_code(SLOW, on_stdout=lambda _: started.set()))
            await asyncio.wait_for(started.wait(), 20)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            await poll("the daemon to count the killed call", lambda: killed_count() > before)
            await poll("the session to be free", lambda: session_status(sbx.sandbox_id) == "ready")
            self.assertEqual((await sbx.run_code("3")).text, "3")

    async def test_asyncio_timeout(self):
        """asyncio.timeout around a one-shot: its sandbox ends on the server"""
        before = await asyncio.to_thread(killed_count)
        with self.assertRaises(TimeoutError):
            async with asyncio.timeout(1.5):
                await ward.run_async(SLOW)
        await poll("the daemon to count the killed one-shot", lambda: killed_count() > before)
        await poll("no one-shot running", lambda: running_oneshots() == 0)

    async def test_client_deadline(self):
        before = await asyncio.to_thread(killed_count)
        async with ward.AsyncSandbox() as sbx:
            with self.assertRaises(ward.TimeoutError) as cm:
                await sbx.run_code(SLOW, request_timeout=1)
            self.assertEqual(cm.exception.execution.verdict.status, "killed")
        self.assertGreater(await asyncio.to_thread(killed_count), before)

    async def test_errors(self):
        """the same typed errors as the sync API"""
        with self.assertRaises(ward.TimeoutError):
            await ward.run_async("while True: pass", timeout=0.5)
        if not await asyncio.to_thread(cgroup_missing):
            with self.assertRaises(ward.MemoryLimitError):
                await ward.run_async("b = bytearray(400 << 20)", policy={"limits": {"memory": "64M"}})
        with self.assertRaises(ward.AuthenticationError):
            await ward.run_async("1", api_key="wk_bad_bad")
        with self.assertRaises(ward.NotFoundError):
            await ward.AsyncSandbox.connect("se_0000000000000000")
        with self.assertRaises(ward.InvalidRequestError) as cm:
            await ward.AsyncSandbox.create(ttl=-1)
        self.assertEqual(cm.exception.field, "ttl")
        if KEY_SMALL:
            async with ward.AsyncSandbox(api_key=KEY_SMALL):
                with self.assertRaises(ward.QuotaExceededError) as cm:
                    await ward.AsyncSandbox.create(api_key=KEY_SMALL)
                self.assertEqual(cm.exception.quota, "max_sessions_per_tenant")
        async with ward.AsyncSandbox() as sbx:
            with self.assertRaises(ward.PayloadTooLargeError):
                await sbx.files.write("big", b"\0" * (2 << 20))
            self.assertEqual((await sbx.run_code("1")).text, "1")

    async def test_call(self):
        try:
            v = await ward.call_async("def f(a):\n    return [a, a]\n", "f", {"a": 1})
        except ward.InvalidRequestError as e:
            self.skipTest(f"this daemon has no function-call mode over HTTP: {e.message}")
        self.assertEqual(v, [1, 1])
        with self.assertRaises(ward.CallError) as cm:
            await ward.call_async("def f(a):\n    return a\n", "g")
        self.assertEqual(cm.exception.name, "FunctionNotFound")
