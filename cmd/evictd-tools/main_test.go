package main

import (
	"os"
	"testing"

	"github.com/evictd/evictd/internal/workload/hog"
)

// asToolsEnv makes the test binary run as evictd-tools, for the tests that
// measure a real process (TestReportBoundsItsInput).
const asToolsEnv = "EVICTD_TEST_AS_EVICTD_TOOLS"

func TestMain(m *testing.M) {
	hog.MaybeRun() // the demo's workloads are this binary re-executed (TestReportOfTheDemo)
	if os.Getenv(asToolsEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
