"""Read pip-audit's JSON report (`make audit`): exit 1 for a known vulnerability with a released fix.

A vulnerability without a fixed release is listed and passes. Packages the advisory service had no
data for, or a service that did not answer, are reported loudly and pass (an outage elsewhere must
not block every change here); AUDIT_STRICT=1 fails then too. A pip-audit error of any other kind fails.
"""

import json
import os
import pathlib
import sys


def main(path: str) -> None:
    """Report the findings and exit with the verdict."""
    report = pathlib.Path(path)
    strict = os.environ.get("AUDIT_STRICT") == "1"
    if not report.exists():
        log = pathlib.Path(f"{report}.log")
        last = (log.read_text(errors="replace").strip().splitlines() or ["?"])[-1] if log.exists() else "?"
        if not any(word in last for word in ("ConnectionError", "Timeout", "ServiceError", "NameResolution")):
            sys.exit(f"audit: pip-audit failed: {last}")
        print("audit: WARNING: nothing audited, the vulnerability service did not answer:", last)
        sys.exit(1 if strict else 0)
    deps = json.loads(report.read_text())["dependencies"]
    found = [(d["name"], d["version"], v) for d in deps for v in d.get("vulns", [])]
    fixable = [(n, ver, v) for n, ver, v in found if v["fix_versions"]]
    audited = [d for d in deps if "skip_reason" not in d]
    unaudited = [d["name"] for d in deps if "skip_reason" in d and "editable" not in d["skip_reason"]]
    for name, version, v in found:
        fix = ", ".join(v["fix_versions"]) or "no fixed release yet"
        print(f"audit: {name} {version}: {v['id']} {' '.join(v.get('aliases', []))} (fixed in: {fix})")
    if unaudited:
        print(f"audit: WARNING: {len(unaudited)} of {len(deps)} dependencies could not be audited (no advisory data "
              f"from the service for them): {', '.join(sorted(unaudited))}")
    print(f"audit: {len(audited)} dependencies audited, {len(found)} known vulnerabilities, "
          f"{len(fixable)} with a fixed release")
    sys.exit(1 if fixable or (strict and unaudited) else 0)


if __name__ == "__main__":
    main(sys.argv[1])
