package load

import (
	"fmt"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// SummaryFile reads and decodes a kubelet /stats/summary document.
func SummaryFile(path string) (*statsv1alpha1.Summary, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSummary(data, path)
}

// ParseSummary decodes a /stats/summary document (JSON as the kubelet serves
// it, or YAML), strictly: unknown fields, duplicate keys and wrong types are
// errors naming the field path.
func ParseSummary(data []byte, name string) (*statsv1alpha1.Summary, error) {
	js, top, err := toJSON(data, name)
	if err != nil {
		return nil, err
	}
	if top != topObject {
		return nil, &Error{File: name, Err: fmt.Errorf("top level is %s, want a Summary object ({\"node\": …, \"pods\": […]})", top)}
	}
	s := &statsv1alpha1.Summary{}
	if err := decodeStrict(js, name, "", s); err != nil {
		return nil, err
	}
	return s, nil
}
