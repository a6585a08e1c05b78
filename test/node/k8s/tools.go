//go:build tools

// Package k8s pins the Kubernetes v1.37.2 commands that the real-node test
// tier runs. It is a module of its own so that k8s.io/kubernetes never enters
// evictd's main go.mod; scripts/node-bins.sh builds these into .cache/node/bin,
// keyed on this module's go.sum.
package k8s

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
