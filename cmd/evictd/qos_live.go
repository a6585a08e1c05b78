package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/protect"
	"github.com/evictd/evictd/internal/workload"
)

// runQoSLive prints what is written now on the workloads next to what
// `evictd run` keeps there (internal/protect.Observe).
func runQoSLive(src kubeletconfig.Source, rootRel, workloadsPath, out string, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "evictd qos --live: "+format+"\n", a...)
		return cli.ExitError
	}
	c, err := kubeletconfig.Read(src)
	if err != nil {
		return fail("%v", err)
	}
	warnKubeletConfig(stderr, "qos --live", c)
	s, err := hostQoSSettings(c)
	if err != nil {
		return fail("%v", err)
	}
	h, err := cgroup.Detect("/proc")
	if err != nil {
		return fail("%v", err)
	}
	memRoot, version, ok := h.Controller("memory")
	if !ok {
		return fail("no memory cgroup controller on this host")
	}
	s.CgroupV2 = version == 2
	var f *workload.File
	if workloadsPath != "" {
		if f, err = workload.ReadFile(workloadsPath); err != nil {
			return fail("%v", err)
		}
	}
	root := filepath.Join(memRoot, path.Clean("/"+strings.Trim(rootRel, "/")))
	self, _ := workload.SelfCgroup(memRoot, s.CgroupV2)
	ws, err := workload.Discover(f, root, self)
	if err != nil {
		return fail("%v", err)
	}
	rows := protect.Observe(s, root, "/proc", ws)
	differ := 0
	for _, r := range rows {
		if r.Differs {
			differ++
		}
	}
	if out == "json" {
		b, err := json.MarshalIndent(struct {
			Root        string        `json:"root"`
			Differences int           `json:"differences"`
			Rows        []protect.Row `json:"rows"`
		}{root, differ, rows}, "", "  ")
		if err != nil {
			return fail("%v", err)
		}
		stdout.Write(append(b, '\n'))
		return cli.ExitOK
	}
	fmt.Fprintf(stdout, "%s (cgroup v%d): %s\n", root, version, qosSettingsLine(s))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tCLASS\tFILE\tSHOULD BE\tIS NOW\t")
	for _, r := range rows {
		flag := ""
		if r.Differs {
			flag = "!="
		}
		class := string(r.QOSClass)
		if class == "" {
			class = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clip(r.Workload, 32), class, r.File, r.Want, clip(r.Now, 40), flag)
	}
	tw.Flush()
	if differ == 0 {
		fmt.Fprintln(stdout, "Everything is as evictd run keeps it.")
	} else {
		fmt.Fprintf(stdout, "%d difference(s) (!=). evictd run writes them at its next synchronize; see its log if they stay.\n", differ)
		if ok, err := host.HasCapSysResource(); err == nil && !ok {
			fmt.Fprintln(stdout, "This process has no CAP_SYS_RESOURCE; if evictd run lacks it too, it cannot lower an oom_score_adj below 0 (-997, -999): see docs/qos.md.")
		}
	}
	return cli.ExitOK
}
