"""Tests of how an error answer becomes an exception (no daemon needed):
a 409's code says which Conflict it is, so a busy session is never
SessionDead."""

import json
import unittest

import nsbox
from nsbox._wire import error_from, unreachable_message


def body(code, message="m"):
    return json.dumps({"error": {"code": code, "message": message}}).encode()


class ErrorFromTest(unittest.TestCase):
    def test_conflicts_by_code(self):
        for code, cls in [("session_dead", nsbox.SessionDead), ("session_busy", nsbox.SessionBusy),
                          ("session_parked", nsbox.SessionParked), ("exists", nsbox.Exists),
                          ("in_use", nsbox.InUse)]:
            with self.subTest(code=code):
                e = error_from(409, body(code), None)
                self.assertIs(type(e), cls)
                self.assertIsInstance(e, nsbox.Conflict)
                self.assertEqual((e.status, e.code, e.message), (409, code, "m"))

    def test_bad_gateway(self):
        # A session's port with nothing listening (Session.port).
        self.assertIs(type(error_from(502, body("bad_gateway"), None)), nsbox.BadGateway)
        self.assertIs(type(error_from(502, b"<html>", None)), nsbox.BadGateway)

    def test_busy_is_not_dead(self):
        self.assertNotIsInstance(error_from(409, body("session_busy"), None), nsbox.SessionDead)

    def test_unknown_code_falls_back_to_status(self):
        self.assertIs(type(error_from(409, body("something_new"), None)), nsbox.Conflict)
        self.assertIs(type(error_from(404, b"not json", None)), nsbox.NotFound)
        e = error_from(429, body("resource_exhausted"), "3")
        self.assertIsInstance(e, nsbox.ResourceExhausted)
        self.assertEqual(e.retry_after, 3)
        self.assertIs(type(error_from(418, b"", None)), nsbox.NsboxError)


class UnreachableTest(unittest.TestCase):
    def test_by_cause(self):
        # A socket this user may not use is not a daemon that is down.
        denied = unreachable_message("/run/nsbox/nsbox.sock", PermissionError(13, "Permission denied"))
        self.assertIn("permission denied for uid", denied)
        self.assertIn("usermod -aG nsbox", denied)
        self.assertNotIn("Is it running?", denied)
        down = unreachable_message("/run/nsbox/nsbox.sock", ConnectionRefusedError(111, "Connection refused"))
        self.assertIn("Is it running?", down)
        self.assertNotIn("usermod", down)


if __name__ == "__main__":
    unittest.main()
