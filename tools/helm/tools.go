//go:build tools

// Package helm pins the helm command the ops and node tiers run (helm lint,
// helm template, helm install of deploy/helm/evictd). It is a module of its
// own so that helm's dependencies never enter evictd's main go.mod;
// scripts/tool-bins.sh builds it into .cache/tools/helm, keyed on this
// module's go.mod and go.sum.
package helm

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
