package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cli"
	"k8s.io/klog/v2"
)

// jsonLines decodes every line of out as a JSON object, failing on one that
// is not: a klog line in klog's own format would be one.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON log line: %q", l)
		}
		recs = append(recs, m)
	}
	return recs
}

// find returns the record whose msg is msg, or nil.
func find(recs []map[string]any, msg string) map[string]any {
	for _, r := range recs {
		if r["msg"] == msg {
			return r
		}
	}
	return nil
}

// After any command parsed its flags, klog — what client-go logs through —
// writes into the command's slog logger: its level, its format, its
// stream; klog's warnings stay warnings, structured pairs stay pairs.
func TestKlogRoutedIntoCommandLogger(t *testing.T) {
	defer klog.ClearLogger()
	for _, level := range []string{"debug", "info", "warn", "error"} {
		var out, errb bytes.Buffer
		code := run([]string{"lint", "--eviction-hard", "memory.available<1Gi", "--log-format", "json", "--log-level", level}, &out, &errb)
		if code == cli.ExitError || errb.Len() != 0 { // 1: lint's warnings
			t.Fatalf("lint: exit %d, stderr %q", code, errb.String())
		}
		klog.Warningf("watch of %s ended", "*v1.Pod")
		klog.InfoS("caches populated", "type", "*v1.Pod")
		klog.V(4).InfoS("list and watch", "resource", "pods")
		klog.V(5).InfoS("every request")
		klog.ErrorS(errors.New("forbidden"), "failed to list", "resource", "pods")
		klog.Background().WithName("reflector").Info("contextual", "n", 1)

		recs := jsonLines(t, errb.String())
		want := map[string]string{ // msg → level, when logged at this --log-level
			"watch of *v1.Pod ended": "WARN", "caches populated": "INFO", "list and watch": "DEBUG",
			"failed to list": "ERROR", "contextual": "INFO",
		}
		rank := map[string]int{"DEBUG": 0, "INFO": 1, "WARN": 2, "ERROR": 3}
		for msg, lv := range want {
			r := find(recs, msg)
			if shown := rank[lv] >= rank[strings.ToUpper(level)]; shown != (r != nil) {
				t.Errorf("--log-level %s: %q logged %v, want %v:\n%s", level, msg, r != nil, shown, errb.String())
				continue
			}
			if r != nil && r["level"] != lv {
				t.Errorf("--log-level %s: %q at %v, want %s", level, msg, r["level"], lv)
			}
		}
		if find(recs, "every request") != nil {
			t.Errorf("--log-level %s: klog V(5) logged", level)
		}
		if r := find(recs, "watch of *v1.Pod ended"); r != nil && !strings.HasPrefix(fmt.Sprint(r["caller"]), "logging_test.go:") {
			t.Errorf("printf-style klog line without its caller: %v", r)
		}
		if r := find(recs, "caches populated"); r != nil && r["type"] != "*v1.Pod" {
			t.Errorf("structured klog pairs lost: %v", r)
		}
		if r := find(recs, "failed to list"); r != nil && r["err"] != "forbidden" {
			t.Errorf("klog error without its err: %v", r)
		}
	}
}

// --log-level and --log-format are every command's, and bad values are one
// line naming the flag.
func TestLogFlagsOnEveryCommand(t *testing.T) {
	for _, name := range cli.Names() {
		for _, c := range []struct{ args, want string }{
			{"--log-level=verbose", `invalid argument "verbose" for "--log-level" flag: want debug, info, warn or error`},
			{"--log-format=xml", `invalid argument "xml" for "--log-format" flag: want text or json`},
		} {
			var out, errb bytes.Buffer
			code := run([]string{name, c.args}, &out, &errb)
			if code != cli.ExitError || !strings.Contains(errb.String(), c.want) || strings.Count(errb.String(), "\n") != 1 {
				t.Errorf("%s %s: exit %d, stderr %q", name, c.args, code, errb.String())
			}
		}
		var out, errb bytes.Buffer
		run([]string{name, "--help"}, &out, &errb)
		if !strings.Contains(out.String(), "--log-level level") || !strings.Contains(out.String(), "--log-format format") {
			t.Errorf("%s --help lacks the log flags", name)
		}
	}
}
