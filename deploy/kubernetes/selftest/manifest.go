// Package selftest is the evictd selftest pod's manifest, embedded: the
// one source of both `kubectl apply -k deploy/kubernetes/selftest/` and
// `evictd selftest --kubernetes`, which creates the pod of pod.yaml with
// the image and namespace of kustomization.yaml unless told otherwise.
package selftest

import _ "embed"

// PodYAML is pod.yaml: the selftest pod, before kustomize sets its image
// and namespace.
//
//go:embed pod.yaml
var PodYAML []byte

// KustomizationYAML is kustomization.yaml: the namespace and image the pod
// gets by default.
//
//go:embed kustomization.yaml
var KustomizationYAML []byte
