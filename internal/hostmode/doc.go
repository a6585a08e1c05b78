// Package hostmode wires the agent's loop (internal/agent) to a host whose
// workloads are the child cgroups of a workload root, described by a
// workloads file: Pods lists them (an inotify watch on the root saves
// re-listing it), Stats reads their Summary through the collector,
// Evictor kills a workload's cgroup (internal/actuate), HookReclaimer
// runs the reclaim hooks, and New puts these together with the kernel
// wake-ups, memory QoS (internal/protect) and a lock that keeps a second
// agent off the same workloads. The loop itself, and what every wiring
// shares, stay in internal/agent.
package hostmode
