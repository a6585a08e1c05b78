package policy

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// podFacts are the parts of a pod spec the engine reads on every
// synchronize, derived once per pod object. Walking every pod's spec (and
// component-helpers' map-building request and limit helpers) dominated Step
// on large nodes; the facts make a synchronize touch each pod's spec once.
type podFacts struct {
	uid             uidString
	resourceVersion string
	generation      int64
	seen            uint64 // last synchronize that used these facts

	priority int32
	critical bool
	// requests as GetResourceRequestQuantity computes them
	memRequest, ephRequest, inodesRequest resource.Quantity
	// pod ephemeral-storage limit (resourcehelper.PodLimits)
	podEphLimit    resource.Quantity
	hasPodEphLimit bool
	// non-zero container ephemeral-storage limits, regular containers then
	// sidecars, a later entry replacing an earlier one of the same name
	containerEphLimits []namedQuantity
	// emptyDir volumes with a positive sizeLimit, in spec order (others can
	// never be over their limit)
	emptyDirLimits []namedQuantity
	// names of hostPath and local ephemeral volumes (disk ranking)
	localVolumes []string
}

type uidString = string

type namedQuantity struct {
	name string
	q    resource.Quantity
}

func newPodFacts(p *v1.Pod, gates FeatureGates) *podFacts {
	f := &podFacts{
		uid:             string(p.UID),
		resourceVersion: p.ResourceVersion,
		generation:      p.Generation,
		priority:        corev1helpers.PodPriority(p),
		critical:        IsCriticalPod(p),
		memRequest:      requestQuantity(p, v1.ResourceMemory, gates),
		ephRequest:      requestQuantity(p, v1.ResourceEphemeralStorage, gates),
		inodesRequest:   requestQuantity(p, ResourceInodes, gates),
	}
	f.podEphLimit, f.hasPodEphLimit = podLimit(p, v1.ResourceEphemeralStorage)
	addLimit := func(c *v1.Container) {
		l, has := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if !has || l.Value() == 0 {
			return
		}
		for i := range f.containerEphLimits {
			if f.containerEphLimits[i].name == c.Name {
				f.containerEphLimits[i].q = l
				return
			}
		}
		f.containerEphLimits = append(f.containerEphLimits, namedQuantity{c.Name, l})
	}
	for i := range p.Spec.Containers {
		addLimit(&p.Spec.Containers[i])
	}
	for i := range p.Spec.InitContainers {
		if isRestartableInitContainer(&p.Spec.InitContainers[i]) {
			addLimit(&p.Spec.InitContainers[i])
		}
	}
	for i := range p.Spec.Volumes {
		vol := &p.Spec.Volumes[i]
		if vol.HostPath != nil || isLocalEphemeralVolume(vol) {
			f.localVolumes = append(f.localVolumes, vol.Name)
		}
		if vol.EmptyDir == nil {
			continue
		}
		if gates.InPlacePodVerticalScalingMemoryBackedVolumes && vol.EmptyDir.Medium == v1.StorageMediumMemory {
			continue
		}
		if s := vol.EmptyDir.SizeLimit; s != nil && s.Sign() == 1 {
			f.emptyDirLimits = append(f.emptyDirLimits, namedQuantity{vol.Name, s.DeepCopy()})
		}
	}
	return f
}

func (f *podFacts) containerEphLimit(name string) (resource.Quantity, bool) {
	for i := range f.containerEphLimits {
		if f.containerEphLimits[i].name == name {
			return f.containerEphLimits[i].q, true
		}
	}
	return resource.Quantity{}, false
}

// factsCache memoises podFacts per pod object. Pods are treated as immutable,
// as Kubernetes API objects are (an informer delivers a new object for every
// change); as a guard, an entry is only reused when the UID, resourceVersion
// and generation still match.
type factsCache struct {
	m    map[*v1.Pod]*podFacts
	step uint64
}

func (c *factsCache) begin() { c.step++ }

func (c *factsCache) get(p *v1.Pod, gates FeatureGates) *podFacts {
	if c.m == nil {
		c.m = make(map[*v1.Pod]*podFacts)
	}
	f, ok := c.m[p]
	if !ok || f.uid != string(p.UID) || f.resourceVersion != p.ResourceVersion || f.generation != p.Generation {
		f = newPodFacts(p, gates)
		c.m[p] = f
	}
	f.seen = c.step
	return f
}

// end drops the facts of pods not seen in this synchronize, once they make
// up a good part of the cache, so that it tracks the live pods.
func (c *factsCache) end(live int) {
	if len(c.m) <= live+live/2+16 {
		return
	}
	for p, f := range c.m {
		if f.seen != c.step {
			delete(c.m, p)
		}
	}
}
