package load

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Kubelet configuration identity, as the kubelet's config-file loader wants it.
const (
	KubeletConfigKind       = "KubeletConfiguration"
	KubeletConfigAPIVersion = "kubelet.config.k8s.io/v1beta1"
)

// KubeletConfigFile reads and decodes a KubeletConfiguration file.
func KubeletConfigFile(path string) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	data, err := readFile(path)
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
	data, err := readFile(path)
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

// readFile reads a whole input file; its errors already name the path.
func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	return data, nil
}

// KubeletConfigFileLenient reads the kubelet's own config file as the
// kubelet does: strictly first, and when that fails only for unknown fields
// or duplicate keys, again leniently (unknown fields ignored, the last of
// duplicate keys kept), with the strict error returned as a warning. Any
// other problem (syntax, a wrong type, kind or apiVersion) is an error.
// Kubernetes mode reads the host's kubelet configuration this way: a field
// of a newer kubelet, or a duplicate the kubelet tolerates, must not stop
// evictd.
func KubeletConfigFileLenient(path string) (kc *kubeletconfigv1beta1.KubeletConfiguration, warning error, err error) {
	data, err := readFile(path)
	if err != nil {
		return nil, nil, err
	}
	return ParseKubeletConfigLenient(data, path)
}

// ParseKubeletConfigLenient is KubeletConfigFileLenient on data.
func ParseKubeletConfigLenient(data []byte, name string) (*kubeletconfigv1beta1.KubeletConfiguration, error, error) {
	kc, strictErr := ParseKubeletConfig(data, name)
	if strictErr == nil {
		return kc, nil, nil
	}
	if !errors.Is(strictErr, ErrUnknownField) && !errors.Is(strictErr, ErrDuplicateKey) {
		return nil, nil, strictErr
	}
	js, err := yaml.YAMLToJSON(data) // JSON passes through; duplicates collapse to the last
	if err != nil {
		return nil, nil, &Error{File: name, Err: fmt.Errorf("not valid YAML: %w", err)}
	}
	kc = &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, kc); err != nil {
		return nil, nil, &Error{File: name, Err: err}
	}
	return kc, strictErr, nil
}
