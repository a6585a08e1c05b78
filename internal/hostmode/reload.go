package hostmode

import "github.com/evictd/evictd/internal/workload"

// SetFile replaces the workloads file; the next listing uses it.
func (h *Pods) SetFile(f *workload.File) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.File = f
	h.cached = nil // the Pods built from the old file
}

// ReloadWorkloadsFile returns the reload of the workloads file at path for
// a Reloader: read and check the whole file, then swap it in.
func (h *Pods) ReloadWorkloadsFile(path string) func() error {
	return func() error {
		f, err := workload.ReadFile(path)
		if err != nil {
			return err
		}
		h.SetFile(f)
		return nil
	}
}
