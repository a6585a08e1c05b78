//go:build tools

// Package prometheus pins the Prometheus commands the tests run: promtool
// (promtool check rules / test rules on the shipped alert rules) and the
// Prometheus server the node tier starts on loopback to scrape evictd on the
// real node and run every dashboard query. It is a module of its own so that
// Prometheus's dependencies never enter evictd's main go.mod;
// scripts/tool-bins.sh builds both into .cache/tools/prometheus, keyed on
// this module's go.mod and go.sum, with only the Kubernetes service
// discovery compiled in (build tags remove_all_sd,enable_kubernetes_sd).
package prometheus

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
