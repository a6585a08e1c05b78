package load

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

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

// ConfigzKey is the key of a kubelet's /configz dump (kubectl get --raw
// /api/v1/nodes/NODE/proxy/configz): {"kubeletconfig": {…}}.
const ConfigzKey = "kubeletconfig"

// KubeletDocument is a kubelet configuration file as the kubelet's own
// loader reads it.
type KubeletDocument struct {
	Config *kubeletconfigv1beta1.KubeletConfiguration
	// Present holds the top-level fields written with a non-null value, for
	// checks that must tell an explicit zero ("evictionPressureTransitionPeriod:
	// 0s") from an absent field.
	Present map[string]bool
	// Warnings are the unknown fields and duplicate keys (each an *Error),
	// dropped or collapsed to the last value as the kubelet's lenient
	// fallback decoding does: an agent must not refuse a file its kubelet
	// runs with; `evictd lint` reports them.
	Warnings []error
	// Configz: the file is a /configz dump, the configuration the kubelet
	// runs with — its file, its drop-ins and its command line, defaulted.
	Configz bool
}

// ReadKubeletDocument reads a KubeletConfiguration file or a /configz dump;
// see ParseKubeletDocument.
func ReadKubeletDocument(path string) (*KubeletDocument, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseKubeletDocument(data, path)
}

// ParseKubeletDocument decodes a KubeletConfiguration (YAML or JSON) as the
// kubelet does — strictly, and when that fails only on unknown fields or
// duplicate keys, leniently, with each of them as a warning — or a /configz
// dump, whose "kubeletconfig" object is decoded the same way (errors name
// its fields kubeletconfig.…). Every other problem is an error naming the
// file, field and value: a wrong type, a kind or apiVersion other than
// KubeletConfiguration kubelet.config.k8s.io/v1beta1, and a document none of
// whose top-level keys is a KubeletConfiguration field, which is not read as
// one (with the kubelet's defaults) but refused.
func ParseKubeletDocument(data []byte, name string) (*KubeletDocument, error) {
	var dups []*Error
	js, top, err := convert(data, name, &dups)
	if err != nil {
		return nil, err
	}
	if top != topObject {
		return nil, &Error{File: name, Err: fmt.Errorf("top level is %s, want a KubeletConfiguration object", top)}
	}
	doc := &KubeletDocument{}
	prefix := ""
	var fields map[string]json.RawMessage
	if json.Unmarshal(js, &fields) == nil {
		if inner, ok := fields[ConfigzKey]; ok {
			doc.Configz, prefix, js = true, ConfigzKey, inner
			if k := topKindOf(inner); k != topObject {
				return nil, &Error{File: name, Field: ConfigzKey, Err: fmt.Errorf("is %s, want the KubeletConfiguration object of a /configz dump", k)}
			}
			var kept []*Error
			for _, d := range dups {
				if strings.HasPrefix(d.Field, ConfigzKey+".") {
					kept = append(kept, d)
				}
			}
			dups = kept
			fields = nil
			_ = json.Unmarshal(js, &fields)
		}
	}
	if err := checkTypeMeta(js, name, prefix, []string{KubeletConfigKind}, KubeletConfigAPIVersion); err != nil {
		return nil, err
	}
	doc.Present = make(map[string]bool, len(fields))
	for k, v := range fields {
		if string(v) != "null" {
			doc.Present[k] = true
		}
	}
	kc := &kubeletconfigv1beta1.KubeletConfiguration{}
	strictErrs, err := sigsjson.UnmarshalStrict(js, kc)
	if err != nil {
		return nil, decodeStrict(js, name, prefix, &kubeletconfigv1beta1.KubeletConfiguration{}) // names the field and value
	}
	if len(strictErrs) > 0 && noneKnown(fields) {
		return nil, &Error{File: name, Field: prefix, Err: ErrWrongDocument}
	}
	for _, d := range dups {
		doc.Warnings = append(doc.Warnings, d)
	}
	for _, e := range strictErrs {
		doc.Warnings = append(doc.Warnings, strictError(e, name, prefix))
	}
	doc.Config = kc
	return doc, nil
}

// noneKnown reports an object none of whose keys is a KubeletConfiguration
// field (kind and apiVersion count): a file the kubelet would refuse
// ("Object 'Kind' is missing") and that is not one mistyped, so defaults
// must not stand in for it.
func noneKnown(fields map[string]json.RawMessage) bool {
	known := jsonFields(reflect.TypeOf(kubeletconfigv1beta1.KubeletConfiguration{}))
	for k := range fields {
		if _, ok := known[k]; ok {
			return false
		}
	}
	return true
}

func topKindOf(js []byte) topKind {
	switch t := bytes.TrimSpace(js); {
	case len(t) > 0 && t[0] == '{':
		return topObject
	case len(t) > 0 && t[0] == '[':
		return topList
	}
	return topScalar
}

// KubeletDropIn is one file of the kubelet's --config-dir, as the kubelet
// reads it before merging (cmd/kubelet/app/server.go:
// loadDropinConfigFileIntoJSON).
type KubeletDropIn struct {
	// Patch is the file as a JSON object: the RFC 7386 merge patch the
	// kubelet applies.
	Patch []byte
	// Kind and APIVersion as written ("" when absent).
	Kind, APIVersion string
}

// ParseKubeletDropIn decodes a drop-in (YAML or JSON) as the kubelet's
// strict decoder does before it merges it: one object; a duplicate key is an
// error, for the kubelet's strict decoding of a drop-in has no lenient
// fallback and it refuses to start. Unknown fields are not checked here:
// the kubelet merges the drop-in as JSON and decodes the merged result
// leniently (DecodeKubeletMerged).
func ParseKubeletDropIn(data []byte, name string) (*KubeletDropIn, error) {
	var dups []*Error
	js, top, err := convert(data, name, &dups)
	if err != nil {
		return nil, err
	}
	if top != topObject {
		return nil, &Error{File: name, Err: fmt.Errorf("top level is %s, want a KubeletConfiguration object", top)}
	}
	// JSON input is passed through as is: find its duplicates too.
	var m map[string]any
	if strictErrs, err := sigsjson.UnmarshalStrict(js, &m); err != nil {
		return nil, &Error{File: name, Err: fmt.Errorf("not valid JSON: %w", err)}
	} else {
		for _, e := range strictErrs {
			d := strictError(e, name, "")
			dups = append(dups, d)
		}
	}
	if len(dups) > 0 {
		d := dups[0]
		d.Err = fmt.Errorf("%w: the kubelet refuses a drop-in with a duplicate key (its strict decoding of drop-ins has no lenient fallback)", ErrDuplicateKey)
		return nil, d
	}
	kind, av := typeMeta(js)
	return &KubeletDropIn{Patch: js, Kind: kind, APIVersion: av}, nil
}

// DecodeKubeletMerged decodes the JSON of a kubelet configuration merged
// from its file and drop-ins as the kubelet does: with encoding/json
// (json.Unmarshal in mergeKubeletConfigurations), so unknown fields are
// dropped and field names match case-insensitively. An error names the
// field and value, from name (the merged configuration's description).
func DecodeKubeletMerged(js []byte, name string) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	kc := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(js, kc); err != nil {
		if path, value, cause := locate(js, reflect.TypeOf(*kc), ""); cause != nil {
			return nil, &Error{File: name, Field: path, Value: value, Err: cause}
		}
		return nil, &Error{File: name, Err: cleanCause(err)}
	}
	return kc, nil
}
