package agent

import (
	"os"
	"testing"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// TestMain lets the test binary run as cgrouptest's hog (StartHog).
func TestMain(m *testing.M) {
	cgrouptest.RunHogIfChild()
	os.Exit(m.Run())
}
