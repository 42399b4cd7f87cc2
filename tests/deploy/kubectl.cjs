// kubectl is not a Debian package, so a fresh Debian 12 machine has none. The tests that render
// the kustomizations call requireKubectl() first: without kubectl they say so and exit 77 (ctest
// reports the test as skipped); with CI=true a missing kubectl is a failure, so CI never passes
// without having rendered the manifests.
"use strict";
const { spawnSync } = require("child_process");

function requireKubectl(kubectl) {
  const r = spawnSync(kubectl, ["version", "--client"], { encoding: "utf8", timeout: 30000 });
  if (!r.error && r.status === 0) return;
  const why = `kubectl (${kubectl}) cannot run: ${r.error ? r.error.message : r.stderr.trim()}; ` +
    "kubectl is not a Debian package (see README, Quick start)";
  if (process.env.CI === "true") {
    console.log(`FAILED ${why} (CI=true: a missing kubectl fails)`);
    process.exit(1);
  }
  console.log(`SKIPPED ${why}`);
  process.exit(77);
}

module.exports = { requireKubectl };
