package actuate

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/evictd/evictd/internal/cgroup"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
)

// Frozen is a workload cgroup found frozen at start-up.
type Frozen struct {
	Cgroup string // the frozen cgroup (v1: in the freezer hierarchy)
	Procs  int    // processes in it
}

// ThawLeft thaws the cgroups at and under root (a memory cgroup: the
// workload root, or the pods cgroup) that are frozen. evictd freezes a
// workload only for the moment of its kill (v1: freeze, SIGKILL, thaw); if
// evictd dies in that moment, the workload's processes stay stopped with
// their memory, and their pending SIGKILL is delivered only when they are
// thawed. Nothing else on a node evictd manages freezes workload cgroups
// (the kubelet never pauses a pod), so a frozen one at start-up is such a
// leftover. Thawing delivers the pending SIGKILL, or, if the kill never
// went out, lets the workload run on (the next synchronize decides about
// it again). In a dry run it only reports what it finds.
// Each one found is logged (a warning: something went wrong before).
func (k *Killer) ThawLeft(root string) ([]Frozen, error) {
	found, err := k.thawLeft(root)
	for _, f := range found {
		if k.DryRun {
			k.log().Warn("a workload cgroup is frozen, left so by a kill interrupted by a crash; a real run thaws it", "cgroup", f.Cgroup, "processes", f.Procs)
			continue
		}
		k.log().Warn("thawed a workload cgroup left frozen by a kill interrupted by a crash; a SIGKILL pending since then is delivered now", "cgroup", f.Cgroup, "processes", f.Procs)
	}
	if err != nil {
		k.log().Warn("cannot check the workload cgroups for ones left frozen", "root", root, "err", err)
	}
	return found, err
}

func (k *Killer) thawLeft(root string) ([]Frozen, error) {
	if k.Mode == V2 {
		return walkFrozen(root, func(dir string) (bool, error) {
			// What was asked (cgroup.freeze), not what took hold
			// (cgroup.events' frozen): a freeze under way is left
			// too, as v1's FREEZING is.
			f, err := cgroupv2.ReadCgroupFreeze(dir)
			if errors.Is(err, errors.ErrUnsupported) {
				return false, nil // before 5.2 nothing freezes a v2 cgroup
			}
			return err == nil && f, ignoreVanished(err)
		}, func(dir string) error {
			return cgroup.WriteFile(dir, "cgroup.freeze", "5.2", "0")
		}, k.DryRun)
	}
	if k.FreezerRoot == "" {
		return nil, nil
	}
	rel, err := filepath.Rel(k.MemoryRoot, root)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("cgroup %s is not under the memory root %s", root, k.MemoryRoot)
	}
	return walkFrozen(filepath.Join(k.FreezerRoot, rel), func(dir string) (bool, error) {
		s, err := cgroupv1.ReadFreezerState(dir)
		return err == nil && s != cgroupv1.Thawed, ignoreVanished(err)
	}, func(dir string) error {
		return cgroup.WriteFile(dir, "freezer.state", "2.6.28", string(cgroupv1.Thawed))
	}, k.DryRun)
}

// walkFrozen visits dir and its descendants top-down, thawing each one
// frozen: thawing a cgroup thaws the descendants frozen with it, which are
// then not thawed (nor reported) again.
func walkFrozen(dir string, frozen func(string) (bool, error), thaw func(string) error, dryRun bool) ([]Frozen, error) {
	var out []Frozen
	var errs []error
	var visit func(string)
	visit = func(d string) {
		is, err := frozen(d)
		if err != nil {
			errs = append(errs, err)
		}
		if is {
			pids, _ := ProcsRecursive(d)
			out = append(out, Frozen{Cgroup: d, Procs: len(pids)})
			if !dryRun {
				if err := thaw(d); err != nil {
					errs = append(errs, fmt.Errorf("thaw %s: %w", d, err))
				}
			}
		}
		kids, err := cgroup.Children(d)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return
		}
		for _, c := range kids {
			visit(filepath.Join(d, c))
		}
	}
	visit(dir)
	return out, errors.Join(errs...)
}

// ignoreVanished drops the error of a cgroup that went away (or, for the
// freezer, was never created at that path): nothing there to thaw.
func ignoreVanished(err error) error {
	var v *cgroup.VanishedError
	if err == nil || errors.As(err, &v) || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
