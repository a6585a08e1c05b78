package hog

import (
	"strings"
	"testing"
	"time"
)

func TestParseScript(t *testing.T) {
	steps, err := ParseScript("ignore-term; alloc 64Mi; sleep 2s; ramp 416Mi 128Mi; free; hold")
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{{Op: "ignore-term"}, {Op: "alloc", Bytes: 64 << 20}, {Op: "sleep", Dur: 2 * time.Second},
		{Op: "ramp", Bytes: 416 << 20, Rate: 128 << 20}, {Op: "free"}, {Op: "hold"}}
	if len(steps) != len(want) {
		t.Fatalf("%+v", steps)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, steps[i], want[i])
		}
	}
	for _, c := range []struct{ in, want string }{
		{"jump 1", `step 1 "jump 1": unknown step`},
		{"alloc", `step 1 "alloc": want 1 argument(s), got 0`},
		{"hold; alloc -1Mi", `step 2 "alloc -1Mi": size "-1Mi" is not a positive quantity`},
		{"ramp 1Gi fast", `rate "fast" is not a positive quantity per second`},
		{"sleep forever", `duration "forever" is not a non-negative duration`},
	} {
		if _, err := ParseScript(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseScript(%q) = %v, want %q", c.in, err, c.want)
		}
	}
}

func FuzzParseScript(f *testing.F) {
	f.Add("alloc 64Mi; sleep 9s; ramp 416Mi 128Mi; hold")
	f.Add("ignore-term;;forkloop")
	f.Fuzz(func(t *testing.T, s string) {
		steps, err := ParseScript(s)
		if err != nil {
			return
		}
		for _, st := range steps {
			if (st.Op == "alloc" || st.Op == "ramp") && st.Bytes <= 0 || st.Op == "ramp" && st.Rate <= 0 || st.Dur < 0 {
				t.Fatalf("accepted %+v from %q", st, s)
			}
		}
	})
}
