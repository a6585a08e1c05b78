package main

import "github.com/evictd/evictd/internal/cli"

// The HTML report is a command of evictd-tools (cmd/evictd-tools), not of
// the agent: html/template makes the linker keep every exported method of
// every package linked (client-go's and k8s.io/api's), which doubled the
// agent's size. "evictd report" stays a name the agent answers, so that a
// user following an old runbook is told where it went rather than "unknown
// command". (simulate --plot says the same: internal/cli's simulate.)
func init() {
	cli.Moved("report", "evictd-tools report DECISIONS.jsonl -o FILE.html",
		"the HTML report is in the tools binary (make build puts it in bin/), which carries the renderer the agent leaves out")
}
