"""Test-only start-up hook for `policyd run` launched by tests/integration/test_deploy.py.

Python imports `sitecustomize` at start-up from the first directory of sys.path that
has one; the test puts this directory on PYTHONPATH of the daemon's process only.

1. A pod's ServiceAccount mount, emulated. The kubernetes client's
   `load_incluster_config()` reads the token and CA from fixed paths
   (/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}: the module constants
   SERVICE_TOKEN_FILENAME and SERVICE_CERT_FILENAME of kubernetes.config.incluster_config,
   read when the function runs; kubernetes==37.0.2 offers no environment override).
   Writing to /var/run/secrets on the test machine would touch a global path shared by
   every process (and needs root), so the two constants are pointed at
   $POLICYD_TEST_SERVICEACCOUNT_DIR instead. Everything else of the in-cluster path is
   policyd's own: KUBERNETES_SERVICE_HOST/PORT select it (policyd.kube.client), the
   client re-reads the token file every minute, as in a pod.
2. $POLICYD_TEST_MODULES_OUT: at exit, every module imported after start-up and its
   file, as JSON, so
   the test can check that each one comes from the standard library, from policyd, or
   from a distribution pinned in deploy/requirements.txt (what the image installs).
"""

from __future__ import annotations

import os
import sys

# Loaded before this hook ran (site's own work, the venv's .pth files such as an
# editable install's finder): not the daemon's doing, and not part of the image.
_BEFORE = frozenset(sys.modules)

_sa_dir = os.environ.get("POLICYD_TEST_SERVICEACCOUNT_DIR")
if _sa_dir:
    from kubernetes.config import incluster_config

    incluster_config.SERVICE_TOKEN_FILENAME = os.path.join(_sa_dir, "token")
    incluster_config.SERVICE_CERT_FILENAME = os.path.join(_sa_dir, "ca.crt")

_modules_out = os.environ.get("POLICYD_TEST_MODULES_OUT")
if _modules_out:
    import atexit
    import json

    def _dump_modules(path: str = _modules_out) -> None:
        files = {name: getattr(mod, "__file__", None)
                 for name, mod in list(sys.modules.items()) if name not in _BEFORE}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(files, f, sort_keys=True)

    atexit.register(_dump_modules)
