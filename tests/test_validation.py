"""Schema checks: jsonschema without the grammar of the optional rfc3987_syntax."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import evalbook.params
profile = evalbook.params.load_profile("params/default.yaml")
import rfc3987_syntax  # still importable afterwards, for anything else that wants it
print("rfc3987_syntax" in sys.modules, profile["name"])
"""


def test_loading_and_validating_a_profile_does_not_import_rfc3987_syntax():
    from paths import ROOT

    probe = PROBE.replace('"rfc3987_syntax" in sys.modules', '"rfc3987_syntax" in loaded')
    probe = probe.replace("import rfc3987_syntax  #", "loaded = set(sys.modules)\nimport rfc3987_syntax  #")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "default"]
