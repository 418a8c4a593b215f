"""Uploads through the proxy: files up to 10 MiB must be accepted, larger ones refused."""

import unittest

from app.proxy import send

MB = 1024 * 1024


class UploadThroughProxy(unittest.TestCase):
    def test_small_upload(self):
        self.assertEqual(send("/upload/", 200 * 1024), 201)

    def test_five_megabyte_upload(self):
        self.assertEqual(send("/upload/", 5 * MB), 201)

    def test_upload_over_the_app_limit_is_refused(self):
        self.assertEqual(send("/upload/", 20 * MB), 413)


if __name__ == "__main__":
    unittest.main()
