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
		{"threads 0", `thread count "0" is not between 1 and 64`},
		{"threads many", `thread count "many" is not between 1 and 64`},
		{"leader-exit now", `want 0 argument(s), got 1`},
	} {
		if _, err := ParseScript(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseScript(%q) = %v, want %q", c.in, err, c.want)
		}
	}
}

func TestParseScriptThreads(t *testing.T) {
	steps, err := ParseScript("threads 4; alloc 1Gi; leader-exit; hold")
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{{Op: "threads", N: 4}, {Op: "alloc", Bytes: 1 << 30}, {Op: "leader-exit"}, {Op: "hold"}}
	if len(steps) != len(want) {
		t.Fatalf("%+v", steps)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, steps[i], want[i])
		}
	}
}

// Every thread's share adds up to the whole, in whole pages but for the
// last thread's tail.
func TestShare(t *testing.T) {
	for _, total := range []int64{1, pageSize, 5*pageSize + 7, 1 << 30} {
		for n := 1; n <= 7; n++ {
			var sum int64
			for i := range n {
				p := share(total, i, n)
				if i < n-1 && p%pageSize != 0 {
					t.Errorf("share(%d, %d, %d) = %d: not whole pages", total, i, n, p)
				}
				sum += p
			}
			if sum != total {
				t.Errorf("shares of %d over %d threads add up to %d", total, n, sum)
			}
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
