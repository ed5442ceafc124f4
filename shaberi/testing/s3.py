"""A real S3-compatible server on 127.0.0.1 for tests and benchmarks: moto in server mode, in its own process
(the ``cluster`` extra installs it). ``env`` is what a client needs to reach it: boto3 and s3fs read the
endpoint and the (dummy) credentials from the environment, as they would for a real bucket."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from types import TracebackType

__all__ = ["S3Server"]


class S3Server:
    """``checks_keys``: the server refuses keys it does not know (moto's IAM checks), as a real bucket refuses
    wrong credentials; otherwise it takes any."""

    def __init__(self, checks_keys: bool = False) -> None:
        self.checks_keys = checks_keys
        self.proc: subprocess.Popen[bytes] | None = None
        self.endpoint = ""

    @property
    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1"}

    def start(self) -> S3Server:
        with socket.socket() as s:  # a free port (moto cannot report the one it bound)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = os.environ | ({"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if self.checks_keys else {})
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the S3 test server (moto) did not start") from None
                time.sleep(0.1)

    def bucket(self, name: str) -> str:
        """Create bucket ``name``; return ``s3://name``."""
        import boto3  # type: ignore[import-untyped]  # no type information published

        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket=name)
        return f"s3://{name}"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
