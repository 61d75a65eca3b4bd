"""Builds the Python wheel from binaries already built (no Rust toolchain, no second build).

    python3 packaging/build_wheel.py BIN_DIR OUT_DIR VERSION

BIN_DIR holds `broker` and `client` (stripped copies go in the wheel); the wheel puts them in the
environment's scripts directory (on the PATH of a venv), beside the `partitioned_log_broker`
package and its pytest plugin, registered under pytest's `pytest11` entry point. The layout is the
wheel format's (PEP 427/491): the binaries under `<name>.data/scripts/`, a RECORD of hashes.
"""
import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

NAME = "partitioned_log_broker"
HERE = os.path.dirname(os.path.abspath(__file__))


def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def stripped(path):
    """The binary without its debug info and symbols (about a tenth of the size)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, os.path.basename(path))
        subprocess.run(["strip", "-o", out, path], check=True)
        with open(out, "rb") as f:
            return f.read()


def main(bin_dir, out_dir, version):
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = f"py3-none-{platform}"
    dist_info = f"{NAME}-{version}.dist-info"
    data = f"{NAME}-{version}.data"
    files = []  # (path in the wheel, bytes, executable)
    package = os.path.join(HERE, "python", NAME)
    for module in sorted(os.listdir(package)):
        if module.endswith(".py"):
            with open(os.path.join(package, module), "rb") as f:
                files.append((f"{NAME}/{module}", f.read(), False))
    for binary in ("broker", "client"):
        files.append((f"{data}/scripts/{binary}", stripped(os.path.join(bin_dir, binary)), True))
    metadata = (f"Metadata-Version: 2.1\nName: {NAME.replace('_', '-')}\nVersion: {version}\n"
                "Summary: The partitioned-log workshop's Kafka-protocol broker and client CLI, "
                "with a pytest fixture\nRequires-Python: >=3.8\n")
    files.append((f"{dist_info}/METADATA", metadata.encode(), False))
    wheel = (f"Wheel-Version: 1.0\nGenerator: packaging/build_wheel.py\nRoot-Is-Purelib: false\n"
             f"Tag: {tag}\n")
    files.append((f"{dist_info}/WHEEL", wheel.encode(), False))
    entry_points = f"[pytest11]\nkafka_broker = {NAME}.pytest_plugin\n"
    files.append((f"{dist_info}/entry_points.txt", entry_points.encode(), False))
    record = "".join(f"{path},{digest(body)},{len(body)}\n" for path, body, _ in files)
    record += f"{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode(), False))

    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, f"{NAME}-{version}-{tag}.whl")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as whl:
        for path, body, executable in files:
            info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            # A regular file (pip checks S_ISREG) with its permissions: pip keeps the x bit.
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, body)
    print(target)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
