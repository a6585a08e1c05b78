package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/safetext"
)

// RestConfig loads the caller's kubeconfig as kubectl does:
// --kubeconfig, else $KUBECONFIG, else ~/.kube/config; --context picks a
// context.
func RestConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// Several calls per node, nodes in parallel: client-go's default of 5
	// requests per second would throttle a cluster view of 50 nodes to a
	// minute.
	rc.QPS, rc.Burst = 50, 100
	return rc, nil
}

// WriteJSON writes the report as one indented JSON object (-o json).
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTable writes the report as explain --cluster's table: one row per
// node, nearest to eviction first, then why, and where each node was read.
func (rep *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREADY\tPRESSURE\tNEAREST THRESHOLD\tMARGIN\tTREND\tCROSSES IN\tFIRST TO GO\tAGENT")
	for _, r := range rep.Nodes {
		pressure := "-"
		if len(r.Conditions) > 0 {
			pressure = strings.Join(r.Conditions, ",")
		}
		near, margin, trend, crosses, first := "-", "-", "-", "-", "-"
		if n := r.Nearest; n != nil {
			near = n.Threshold
			margin = fmt.Sprintf("%s (%.1f%%)", n.Margin, n.MarginPercent)
			if n.Met {
				margin += " met"
			}
		}
		if t := r.Trend; t != nil {
			trend = perSecond(t.PerSecond, r.Nearest) + "/s"
			crosses = t.CrossesIn
			if crosses == "" {
				crosses = "-"
			}
		}
		if r.First != nil {
			first = r.First.Pod
			if r.First.Now {
				first += " (now)"
			}
		}
		if r.Error != "" {
			near = "error (below)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", esc(r.Node), r.Ready, pressure, near, margin, trend, crosses,
			esc(first), esc(r.Agent))
	}
	tw.Flush()
	trend := "trend over " + rep.Window
	if rep.Window == "0s" {
		trend = "one sample, no trend (--window)"
	}
	fmt.Fprintf(w, "\nProfile %s; %s. Why, and where each node was read:\n", rep.Profile, trend)
	for _, r := range rep.Nodes {
		fmt.Fprintf(w, "  %s:", esc(r.Node))
		switch {
		case r.Error != "":
			fmt.Fprintf(w, " error: %s\n", esc(r.Error))
		case r.First != nil:
			fmt.Fprintf(w, " %s first on %s: %s\n", esc(r.First.Pod), r.First.Signal, esc(r.First.Why))
		default:
			fmt.Fprintln(w, " no pod to rank")
		}
		if len(r.Met) > 0 {
			fmt.Fprintf(w, "    met now: %s\n", strings.Join(r.Met, ", "))
		}
		if r.Source != "" {
			fmt.Fprintf(w, "    read through: %s\n", esc(r.Source))
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "    note: %s\n", esc(n))
		}
	}
}

// perSecond formats a per-second change in the nearest signal's unit.
func perSecond(v float64, n *Nearest) string {
	if n == nil {
		return fmt.Sprintf("%.1f", v)
	}
	if r, _ := policy.ResourceFor(policy.Signal(n.Signal)); r == policy.ResourceInodes || r == policy.ResourcePIDs {
		return fmt.Sprintf("%+.1f", v)
	}
	const mi = 1 << 20
	return fmt.Sprintf("%+.1fMi", v/mi)
}

func esc(s string) string { return safetext.Escape(s) }
