"""The asyncio entry points: await sb.run_async(...) runs the sandbox off the event loop, so the
loop keeps serving other tasks while a run is in C, and a cancelled await interrupts the run.
No timing is asserted: the guest waits on an event only the loop's other task can set."""

import asyncio
import threading
import unittest

import moonbox
from moonbox import Limits, MoonboxError, Sandbox

SLOW = 60  # seconds: generous, the machine may be heavily loaded


class RunAsync(unittest.TestCase):
    def test_the_loop_runs_while_the_guest_waits(self):
        released = threading.Event()

        def wait_for_loop():
            return released.wait(SLOW)  # set by a task of the loop: only if the loop is free

        async def main(sb):
            run = asyncio.ensure_future(sb.run_async("return wait_for_loop(), ...",
                                                     inputs=None, chunk_name="async.lua"))
            await asyncio.sleep(0.01)
            released.set()
            return await run

        with Sandbox(functions={"wait_for_loop": wait_for_loop}) as sb:
            r = asyncio.run(main(sb))
        self.assertEqual(r.status, "ok", r.error)
        self.assertIs(r.value, True)

    def test_resume_async_and_the_one_liner(self):
        async def main():
            with Sandbox(externals=["fetch"]) as sb:
                r = await sb.run_async("return fetch('x') + 1")
                self.assertEqual((r.status, r.pending["function"]), ("paused", "fetch"))
                r = await sb.resume_async(41)
                return r, await moonbox.run_async("return 6 * 7")

        r, one = asyncio.run(main())
        self.assertEqual((r.status, r.value), ("ok", 42))
        self.assertEqual((one.status, one.value), ("ok", 42))

    def test_cancelling_the_await_interrupts_the_run(self):
        started = threading.Event()

        async def main(sb):
            task = asyncio.ensure_future(sb.run_async("started() while true do end"))
            while not started.is_set():
                await asyncio.sleep(0.005)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        with Sandbox(limits=Limits(instructions=0, timeout=SLOW),
                     functions={"started": started.set}) as sb:
            asyncio.run(main(sb))  # asyncio.run waits for the executor: the run has ended
            self.assertTrue(sb.poisoned)  # it ended on the interrupt, not on the time limit
            sb.reset()
            self.assertEqual(sb.run("return 1 + 1").value, 2)


class WrongTypes(unittest.TestCase):
    def test_wrong_types_of_the_extension_calls(self):
        with Sandbox(externals=["f"]) as sb:
            for call, message in [
                (lambda: sb.run("return 1", chunk_name=5), "chunk_name: expected a str"),
                (lambda: sb.run("return 1", inputs=[1]), "inputs: expected a dict"),
                (lambda: sb.run("return 1", inputs={"x": {1: 2}}), "inputs.x: key 1 is not"),
                (lambda: sb.run("return 1", inputs={"x": [object()]}),
                 "inputs.x[0]: a object cannot be passed"),
                (lambda: Sandbox(limits=5), "limits: expected a Limits"),
            ]:
                with self.assertRaises(TypeError, msg=message) as cm:
                    call()
                self.assertIn(message, str(cm.exception))
            self.assertEqual(sb.run("return f()").status, "paused")
            with self.assertRaises(TypeError):
                sb.resume({"a": object()})
            self.assertTrue(sb.paused)  # nothing was sent: still paused
            with self.assertRaises(MoonboxError):
                sb.run("return 1")  # paused: the library refuses, as before


if __name__ == "__main__":
    unittest.main()
