"""Sharded runs: ``harness merge`` (:mod:`harness.apps.shards.cli`) makes the work folders of a suite's shards one
cycle (harness/records/merge/), and compares it with a baseline cycle (:mod:`harness.apps.shards.gate`), as the
``--harness-compare`` gate compares an unsharded run. docs/ci.md shows the CI workflow."""
