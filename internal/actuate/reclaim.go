package actuate

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"

	"golang.org/x/sys/unix"
)

// ReclaimFile asks the kernel to reclaim page cache of the cgroup v2 dir
// through memory.reclaim (kernel 5.19+), for the policy profile's
// reclaim-first (docs/profile.md, kubernetes#43916). need is how far the
// working set has to shrink. It asks for that plus the inactive file pages
// (the kernel reclaims those first, and they are not in the working set),
// but never for more than the cgroup's file pages: the point is to drop page
// cache the kubelet counts as used, not to push anonymous memory to swap.
// dryRun only says what it would write. The result says what was asked and
// what memory.stat shows reclaimed; a partial reclaim (EAGAIN) is a result,
// not an error.
func ReclaimFile(dir string, need int64, dryRun bool) (string, error) {
	before, err := cgroupv2.ReadMemoryStat(dir)
	if err != nil {
		return "", fmt.Errorf("memory reclaim: %w", err)
	}
	file := before.ActiveFile + before.InactiveFile
	want := min(uint64(max(need, 0))+before.InactiveFile, file)
	if want == 0 {
		return "no file pages to reclaim in " + dir, nil
	}
	if dryRun {
		return fmt.Sprintf("dry-run: would write %d (%s) to %s/memory.reclaim", want, bytesString(want), dir), nil
	}
	werr := cgroupv2.WriteMemoryReclaim(dir, want)
	partial := errors.Is(werr, unix.EAGAIN)
	if werr != nil && !partial {
		return "", fmt.Errorf("memory reclaim: %w", werr)
	}
	msg := fmt.Sprintf("asked %s to reclaim %s", dir, bytesString(want))
	if partial {
		msg += " (the kernel reclaimed less: EAGAIN)"
	}
	if after, err := cgroupv2.ReadMemoryStat(dir); err == nil {
		if left := after.ActiveFile + after.InactiveFile; left < file {
			msg += fmt.Sprintf("; file pages %s → %s", bytesString(file), bytesString(left))
		}
	}
	return msg, nil
}

func bytesString(b uint64) string {
	return resource.NewQuantity(int64(b), resource.BinarySI).String()
}
