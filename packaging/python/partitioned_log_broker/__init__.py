"""The partitioned-log workshop's Kafka-protocol broker and `client` CLI, for test suites.

Installing the wheel puts `broker` and `client` on the PATH of the environment; `start_broker`
runs a fresh broker on a free port for a test, and the pytest plugin (`pytest_plugin`) offers it
as the `kafka_broker` fixture.
"""
import os
import shutil
import subprocess
import sysconfig

__all__ = ["BROKER", "CLIENT", "Broker", "start_broker", "client"]


def _binary(name):
    # The environment's scripts directory first: the binaries installed with this package.
    installed = os.path.join(sysconfig.get_path("scripts"), name)
    if os.access(installed, os.X_OK):
        return installed
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed with this package nor on the PATH")
    return found


BROKER = _binary("broker")
CLIENT = _binary("client")


class Broker:
    """A broker process on 127.0.0.1, port 0. `bootstrap` is its HOST:PORT, `metrics` the
    metrics HOST:PORT (with metrics=True). It stops with `stop()`, at the end of a `with` block,
    and by itself when the process that started it dies (`--exit-with-parent`)."""

    def __init__(self, *args, metrics=False):
        command = [BROKER, "--listen", "127.0.0.1:0", "--exit-with-parent", *args]
        if metrics:
            command += ["--metrics", "127.0.0.1:0"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.bootstrap = self._address("broker listening on")
        self.metrics = self._address("metrics listening on") if metrics else None

    def _address(self, prefix):
        line = self.process.stdout.readline()
        if not line.startswith(prefix):
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"the broker did not start: {line!r} (its log is on stderr)")
        return line.split()[-1]

    def client(self, *args, check=False):
        """Runs `client --bootstrap THIS ARGS`: a CompletedProcess with text stdout and stderr.
        Exit codes: 0 holds, 1 a check does not hold, 2 it could not be checked."""
        return client(self.bootstrap, *args, check=check)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_broker(*args, metrics=False):
    """A fresh broker (extra broker flags in `args`); use it as a context manager."""
    return Broker(*args, metrics=metrics)


def client(bootstrap, *args, check=False):
    return subprocess.run([CLIENT, "--bootstrap", bootstrap, *args], capture_output=True,
                          text=True, check=check)
