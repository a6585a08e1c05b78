package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// loop is the agent's loop package; wirings are the packages that wire it to
// one kind of node, each with whether it must exist.
const loop = module + "/internal/agent"

var wirings = map[string]bool{
	module + "/internal/hostmode": true,
	module + "/internal/kube":     true,
}

// TestWiringsPointInward fails when the loop depends on a wiring or a wiring
// on another (go list -deps, so indirect imports count too): each wiring
// plugs into the agent's interfaces, so another kind of node can sit beside
// host mode without either knowing the other (docs/architecture.md).
func TestWiringsPointInward(t *testing.T) {
	deps := map[string][]string{}
	for _, p := range append([]string{loop}, keys(wirings)...) {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", p).Output()
		if err != nil {
			if required, isWiring := wirings[p]; isWiring && !required {
				continue
			}
			t.Fatalf("go list -deps %s: %v (update wirings when a wiring moves)", p, err)
		}
		deps[p] = strings.Fields(string(out))
	}
	for p, ds := range deps {
		for w := range wirings {
			if w == p {
				continue
			}
			for _, d := range ds {
				if d == w || strings.HasPrefix(d, w+"/") {
					t.Errorf("%s depends on the wiring %s: the loop and the wirings may depend on each other only as wiring → agent", p, d)
				}
			}
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
