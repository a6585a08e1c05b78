package load

import (
	"encoding/json"
	"errors"
	"fmt"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
)

// Kubelet configuration identity, as the kubelet's config-file loader wants it.
const (
	KubeletConfigKind       = "KubeletConfiguration"
	KubeletConfigAPIVersion = "kubelet.config.k8s.io/v1beta1"
)

// KubeletConfigFile reads and decodes a KubeletConfiguration file.
func KubeletConfigFile(path string) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseKubeletConfig(data, path)
}

// ParseKubeletConfig decodes a KubeletConfiguration (YAML or JSON), strictly:
// unknown fields, duplicate keys, wrong types and a kind or apiVersion other
// than KubeletConfiguration kubelet.config.k8s.io/v1beta1 are errors. name is
// the file name used in errors.
//
// It only decodes. No kubelet defaulting is applied and evictionHard is not
// merged with the defaults (policy.ConfigFromKubelet does that), so an absent
// evictionHard stays nil and an explicit empty map stays empty. A missing kind
// or apiVersion is accepted here; the kubelet itself refuses such a file, which
// `evictd lint` reports (kc.Kind / kc.APIVersion are empty then).
func ParseKubeletConfig(data []byte, name string) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	js, top, err := toJSON(data, name)
	if err != nil {
		return nil, err
	}
	if top != topObject {
		return nil, &Error{File: name, Err: fmt.Errorf("top level is %s, want a KubeletConfiguration object", top)}
	}
	if err := checkTypeMeta(js, name, "", []string{KubeletConfigKind}, KubeletConfigAPIVersion); err != nil {
		return nil, err
	}
	kc := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := decodeStrict(js, name, "", kc); err != nil {
		return nil, err
	}
	return kc, nil
}

// KubeletConfigFileFields is KubeletConfigFile that also returns the
// top-level fields written in the file (with a non-null value), for checks
// that must tell an explicit zero ("evictionPressureTransitionPeriod: 0s")
// from an absent field.
func KubeletConfigFileFields(path string) (*kubeletconfigv1beta1.KubeletConfiguration, map[string]bool, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return ParseKubeletConfigFields(data, path)
}

// ParseKubeletConfigFields is ParseKubeletConfig that also returns the
// top-level fields present; see KubeletConfigFileFields.
func ParseKubeletConfigFields(data []byte, name string) (*kubeletconfigv1beta1.KubeletConfiguration, map[string]bool, error) {
	kc, err := ParseKubeletConfig(data, name)
	if err != nil {
		return nil, nil, err
	}
	js, _, _ := toJSON(data, name) // cannot fail: ParseKubeletConfig succeeded
	var top map[string]json.RawMessage
	_ = json.Unmarshal(js, &top)
	present := make(map[string]bool, len(top))
	for k, v := range top {
		if string(v) != "null" {
			present[k] = true
		}
	}
	return kc, present, nil
}

// KubeletConfigFileLenient reads a KubeletConfiguration as the kubelet
// itself does; see ParseKubeletConfigLenient.
func KubeletConfigFileLenient(path string) (*kubeletconfigv1beta1.KubeletConfiguration, []error, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return ParseKubeletConfigLenient(data, path)
}

// ParseKubeletConfigLenient decodes strictly and, when that fails only on
// unknown fields or duplicate keys, decodes again leniently (the last
// duplicate wins, unknown fields are dropped) and returns each of them as a
// warning: the kubelet's own config loader does exactly that, so an agent
// must not refuse a file its kubelet runs with. Every other error (a wrong
// type, a bad kind, the wrong kind of file) is still an error. `evictd lint`
// uses the strict ParseKubeletConfig and reports them as findings.
func ParseKubeletConfigLenient(data []byte, name string) (*kubeletconfigv1beta1.KubeletConfiguration, []error, error) {
	kc, err := ParseKubeletConfig(data, name)
	if err == nil || !(errors.Is(err, ErrUnknownField) || errors.Is(err, ErrDuplicateKey)) {
		return kc, nil, err
	}
	var dups []*Error
	js, _, err := convert(data, name, &dups)
	if err != nil {
		return nil, nil, err
	}
	kc = &kubeletconfigv1beta1.KubeletConfiguration{}
	strictErrs, err := sigsjson.UnmarshalStrict(js, kc)
	if err != nil {
		return nil, nil, decodeStrict(js, name, "", kc) // names the field and value
	}
	var warnings []error
	for _, d := range dups {
		warnings = append(warnings, d)
	}
	for _, e := range strictErrs {
		warnings = append(warnings, strictError(e, name, ""))
	}
	return kc, warnings, nil
}
