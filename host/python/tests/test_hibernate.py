"""Hibernation through the Python binding: sb.hibernate() and moonbox.set_hibernate_after()
(mbx_sandbox_hibernate, mbx_runtime_set_hibernate). A woken sandbox is the one that went to
sleep; a sandbox in use or in a worker process is refused, in Python's words. Builds without
the arena (the asan preset's malloc heap) cannot hibernate: those tests are skipped there."""

import threading
import time
import unittest

import moonbox
from moonbox import MoonboxError, Sandbox

# Generous bounds: the machine running the tests may be heavily loaded.
SLOW = 30.0

# Globals whose bytes look like heap addresses (integers, doubles, string.pack bytes), a table
# holding them, a closure's upvalue: a wake that relocated anything would change them.
SET = ("p = 0x7f3a12345678 q = 0x00005555deadbeef d = 3.0e-310 "
       "b = string.pack('<j d s4', 0x7ffd00001000, 2.5e-320, 'heap') t = {p, q, d, b} "
       "local n = 0 bump = function() n = n + 1 return n end bump()")
CHECK = ("return p == 0x7f3a12345678 and q == 0x00005555deadbeef and d == 3.0e-310 and "
         "b == string.pack('<j d s4', 0x7ffd00001000, 2.5e-320, 'heap') and t[1] == p and "
         "t[2] == q and t[3] == d and t[4] == b and bump() == 2")


def _hibernate_or_skip(test, sb):
    try:
        sb.hibernate()
    except MoonboxError as e:
        if e.status == "unsupported":
            test.skipTest("hibernation is not in this build (%s)" % e.message)
        raise


class Hibernate(unittest.TestCase):
    def test_hibernate_then_run_finds_the_state_intact(self):
        with Sandbox() as sb:
            self.assertEqual(sb.run(SET).status, "ok")
            self.assertFalse(sb.hibernated)
            _hibernate_or_skip(self, sb)
            self.assertTrue(sb.hibernated)
            sb.hibernate()  # already asleep: nothing to do
            r = sb.run(CHECK)
            self.assertEqual((r.status, r.value), ("ok", True))
            self.assertFalse(sb.hibernated)
            # reset on a sleeping sandbox wakes it, then clears it.
            sb.hibernate()
            sb.reset()
            self.assertIsNone(sb.run("return p").value)

    def test_a_paused_sandbox_hibernates_and_resumes(self):
        # A pause holds no C stack: the pending call survives the sleep (include/moonbox.h).
        with Sandbox(externals=["fetch"], seed=7) as sb:
            r = sb.run(SET + " local got = fetch('u') return got .. tostring(math.random(1000))")
            self.assertEqual(r.status, "paused")
            _hibernate_or_skip(self, sb)
            self.assertTrue(sb.hibernated)
            self.assertTrue(sb.paused)  # read from the host side: no wake
            self.assertTrue(sb.hibernated)
            with Sandbox(externals=["fetch"], seed=7) as twin:
                self.assertEqual(twin.run(SET + " local got = fetch('u') return got .. "
                                          "tostring(math.random(1000))").status, "paused")
                expected = twin.resume("v").value
            r = sb.resume("v")
            self.assertEqual((r.status, r.value), ("ok", expected))
            self.assertEqual(sb.run(CHECK).value, True)

    def test_refused_while_a_call_is_active_in_python_words(self):
        seen = []

        def sleep_now():
            try:
                sb.hibernate()
            except MoonboxError as e:
                seen.append(e)
            return 1

        with Sandbox(functions={"sleep_now": sleep_now}) as sb:
            r = sb.run("x = 5 return sleep_now() + x")
            self.assertEqual((r.status, r.value), ("ok", 6))
            self.assertFalse(sb.hibernated)
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0].status, "sandbox_busy")
        self.assertIn("hibernate", seen[0].message)
        self.assertNotIn("mbx_", seen[0].message)

    def test_refused_from_another_thread_while_it_runs(self):
        with Sandbox() as sb:
            started = threading.Event()
            result = []

            def spin():
                started.set()
                result.append(sb.run("local t = os.clock() while os.clock() - t < 0.5 do end "
                                     "return 1"))
            th = threading.Thread(target=spin)
            th.start()
            started.wait(SLOW)
            refused = None
            deadline = time.monotonic() + SLOW
            while th.is_alive() and time.monotonic() < deadline:
                try:
                    sb.hibernate()
                except MoonboxError as e:
                    refused = e
                    break
                time.sleep(0.001)  # the run has not claimed it yet
            th.join(SLOW)
            self.assertEqual(result[0].value, 1)
            if refused is None:
                self.skipTest("the run ended before a hibernate could meet it")
            self.assertEqual(refused.status, "sandbox_busy")
            self.assertNotIn("mbx_", refused.message)

    def test_a_worker_sandbox_cannot_hibernate(self):
        try:
            sb = Sandbox(isolate="process")
        except MoonboxError as e:
            self.skipTest("no worker here (%s)" % e.message)
        with sb:
            self.assertEqual(sb.run("x = 1 return x").value, 1)
            with self.assertRaises(MoonboxError) as cm:
                sb.hibernate()
            self.assertEqual(cm.exception.status, "unsupported")
            self.assertIn("sb.hibernate()", cm.exception.message)
            self.assertNotIn("mbx_", cm.exception.message)
            self.assertFalse(sb.hibernated)
            self.assertEqual(sb.run("return x").value, 1)


class HibernateAfter(unittest.TestCase):
    def tearDown(self):
        moonbox.set_hibernate_after(0)  # the runtime is the process's: leave it as found

    def test_values_in_python_words(self):
        moonbox.set_hibernate_after("5m")
        self.assertEqual(moonbox.get_hibernate_after(), 300.0)
        moonbox.set_hibernate_after(0.25)
        self.assertEqual(moonbox.get_hibernate_after(), 0.25)
        moonbox.set_hibernate_after(None)
        self.assertEqual(moonbox.get_hibernate_after(), 0.0)
        for bad, words in (("5 minutes", "is not a duration"), (-1, "expected seconds >= 0"),
                           (True, "expected seconds >= 0"), ("1x", "is not a duration")):
            with self.assertRaises(ValueError) as cm:
                moonbox.set_hibernate_after(bad)
            self.assertIn("set_hibernate_after: ", str(cm.exception))
            self.assertIn(words, str(cm.exception))
        self.assertEqual(moonbox.get_hibernate_after(), 0.0)

    def test_idle_sandboxes_hibernate_and_wake_intact(self):
        with Sandbox() as probe:
            _hibernate_or_skip(self, probe)
        moonbox.set_hibernate_after("50ms")
        with Sandbox() as sb, Sandbox() as other:
            self.assertEqual(sb.run(SET).status, "ok")
            # The runtime looks for idle sandboxes when a call ends: other's calls drive it.
            deadline = time.monotonic() + SLOW
            while not sb.hibernated and time.monotonic() < deadline:
                time.sleep(0.02)
                other.run("return 1")
            self.assertTrue(sb.hibernated, "the idle sandbox was not hibernated within %d s"
                            % SLOW)
            r = sb.run(CHECK)
            self.assertEqual((r.status, r.value), ("ok", True))
            self.assertFalse(sb.hibernated)


if __name__ == "__main__":
    unittest.main()
