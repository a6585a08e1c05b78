package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// topKind is the shape of a document's top-level value.
type topKind int

const (
	topObject topKind = iota
	topList
	topScalar
)

func (k topKind) String() string {
	switch k {
	case topObject:
		return "an object"
	case topList:
		return "a list"
	}
	return "a scalar"
}

// toJSON turns a YAML or JSON document into JSON, the form the Kubernetes
// types decode from. It rejects an empty file, several YAML documents and
// duplicate keys (which YAML-to-JSON conversion would silently collapse to
// the last one, as the kubelet's lenient fallback decoder does). JSON input
// is passed through untouched; its duplicate keys are caught by the strict
// JSON decoder later.
func toJSON(data []byte, file string) ([]byte, topKind, error) {
	return convert(data, file, nil)
}

// convert is toJSON; with dups non-nil, duplicate YAML keys are collected
// there (the last value wins, as in the kubelet's lenient decoding) instead of
// failing.
func convert(data []byte, file string, dups *[]*Error) ([]byte, topKind, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, 0, &Error{File: file, Err: ErrEmpty}
	}
	if (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid(trimmed) {
		k := topObject
		if trimmed[0] == '[' {
			k = topList
		}
		return trimmed, k, nil
	}

	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var doc yamlv3.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, 0, &Error{File: file, Err: ErrEmpty}
		}
		return nil, 0, &Error{File: file, Err: fmt.Errorf("not valid YAML or JSON: %w", err)}
	}
	var next yamlv3.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, 0, &Error{File: file, Err: errors.New("more than one YAML document (---); put one object in the file")}
	}
	if len(doc.Content) == 0 {
		return nil, 0, &Error{File: file, Err: ErrEmpty}
	}
	root := doc.Content[0]
	var found []*Error
	duplicateKeys(root, "", &found)
	for _, d := range found {
		d.File = file
	}
	if dups != nil {
		*dups = append(*dups, found...)
	} else if len(found) > 0 {
		return nil, 0, found[0]
	}
	kind := topScalar
	switch root.Kind {
	case yamlv3.MappingNode:
		kind = topObject
	case yamlv3.SequenceNode:
		kind = topList
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, 0, &Error{File: file, Err: fmt.Errorf("not valid YAML: %w", err)}
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, 0, &Error{File: file, Err: ErrEmpty}
	}
	return js, kind, nil
}

// duplicateKeys walks a YAML tree and appends every key that appears twice in
// one mapping, with its path and both lines, in document order. Aliases are
// not followed: their targets are checked where they are defined.
func duplicateKeys(n *yamlv3.Node, path string, out *[]*Error) {
	switch n.Kind {
	case yamlv3.MappingNode:
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := k.Value
			if first, dup := seen[key]; dup && key != "<<" {
				*out = append(*out, &Error{Field: joinPath(path, key), Value: key,
					Err: fmt.Errorf("%w (lines %d and %d); the kubelet would silently keep the last one", ErrDuplicateKey, first, k.Line)})
			}
			seen[key] = k.Line
			duplicateKeys(v, joinPath(path, key), out)
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			duplicateKeys(c, path+"["+strconv.Itoa(i)+"]", out)
		}
	}
}

// Decode decodes one YAML or JSON document holding an object into v, a
// pointer to a typed struct, strictly: unknown fields, duplicate keys,
// several documents and wrong types are errors (*Error) naming file, field
// path and value. It is the one decoder every input file goes through.
func Decode(data []byte, file string, v any) error {
	js, top, err := toJSON(data, file)
	if err != nil {
		return err
	}
	if top != topObject {
		return &Error{File: file, Err: fmt.Errorf("top level is %s, want an object", top)}
	}
	return decodeStrict(js, file, "", v)
}

// decodeStrict decodes JSON into v as the Kubernetes API machinery does
// (case-sensitive field names, integers preserved), and fails on unknown or
// duplicate fields. Errors name the field path (under prefix) and the value.
func decodeStrict(js []byte, file, prefix string, v any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(js, v)
	if err != nil {
		if isSyntax, _ := sigsjson.SyntaxErrorOffset(err); isSyntax {
			return &Error{File: file, Field: prefix, Err: fmt.Errorf("not valid JSON: %w", err)}
		}
		if path, value, cause := locate(js, reflect.TypeOf(v).Elem(), ""); cause != nil {
			return &Error{File: file, Field: joinPath(prefix, path), Value: value, Err: cause}
		}
		return &Error{File: file, Field: prefix, Err: err}
	}
	if len(strictErrs) > 0 {
		if noKnownField(js, reflect.TypeOf(v).Elem()) {
			// Not a typo but the wrong file (a scenario naming /etc/shadow
			// as its summary): naming its keys would echo its content.
			return &Error{File: file, Field: prefix, Err: ErrWrongDocument}
		}
		return strictError(strictErrs[0], file, prefix)
	}
	return nil
}

// strictError turns one of sigs.k8s.io/json's strict errors (an unknown or
// duplicate field) into an *Error.
func strictError(e error, file, prefix string) *Error {
	cause := ErrUnknownField
	if strings.HasPrefix(e.Error(), "duplicate field") {
		cause = ErrDuplicateKey
	}
	field := ""
	if fe, ok := e.(sigsjson.FieldError); ok {
		field = fe.FieldPath()
	}
	return &Error{File: file, Field: joinPath(prefix, field), Err: cause}
}

// noKnownField reports whether js is an object none of whose keys is a field
// of struct type t, and which is not one mistyped field name either (several
// keys, or a key no field name would look like).
func noKnownField(js []byte, t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(js, &top) != nil || len(top) == 0 {
		return false
	}
	fields := jsonFields(t)
	for k := range top {
		if _, ok := fields[k]; ok {
			return false
		}
		if len(top) == 1 && fieldLike(k) {
			return false
		}
	}
	return true
}

// fieldLike reports whether s could be a mistyped field name.
func fieldLike(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

var unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// locate finds the first value (in sorted key order, so the answer is
// deterministic) that cannot be decoded into its Go type, and returns its
// path, its text and why. It is only called after decoding failed, because
// encoding/json reports neither the path of an error raised by a type's own
// UnmarshalJSON (resource.Quantity, metav1.Duration) nor the offending value.
func locate(raw []byte, t reflect.Type, path string) (string, string, error) {
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, reflect.New(t).Interface()); err == nil {
		return "", "", nil
	} else if reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType) {
		return path, rawText(raw), cleanCause(err)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return locate(raw, t.Elem(), path)
	case reflect.Struct:
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) != nil {
			return path, rawText(raw), errors.New("want an object")
		}
		types := jsonFields(t)
		for _, k := range sortedKeys(fields) {
			if ft, ok := types[k]; ok {
				if p, val, err := locate(fields[k], ft, joinPath(path, k)); err != nil {
					return p, val, err
				}
			}
		}
	case reflect.Map:
		var entries map[string]json.RawMessage
		if json.Unmarshal(raw, &entries) != nil {
			return path, rawText(raw), errors.New("want a map")
		}
		for _, k := range sortedKeys(entries) {
			if p, val, err := locate(entries[k], t.Elem(), joinPath(path, k)); err != nil {
				return p, val, err
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			break // []byte is a base64 string
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return path, rawText(raw), errors.New("want a list")
		}
		for i, it := range items {
			if p, val, err := locate(it, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return p, val, err
			}
		}
	}
	return path, rawText(raw), wantScalar(t, raw)
}

// jsonFields maps the JSON names of t's fields (including those of inlined,
// embedded structs such as TypeMeta) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// rawText is a JSON value as a user wrote it: strings unquoted.
func rawText(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// wantScalar explains what a scalar field expects.
func wantScalar(t reflect.Type, raw []byte) error {
	isNumber := len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
	switch t.Kind() {
	case reflect.Bool:
		return errors.New("want true or false")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if isNumber {
			return fmt.Errorf("want a whole number that fits %s", t.Kind())
		}
		return errors.New("want a whole number")
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if isNumber {
			return fmt.Errorf("want a non-negative whole number that fits %s", t.Kind())
		}
		return errors.New("want a non-negative whole number")
	case reflect.Float32, reflect.Float64:
		return errors.New("want a number")
	case reflect.String:
		return errors.New("want a string (quote the value)")
	case reflect.Struct:
		return errors.New("want an object")
	case reflect.Map:
		return errors.New("want a map")
	case reflect.Slice, reflect.Array:
		return errors.New("want a list")
	}
	return fmt.Errorf("cannot be decoded as %s", t)
}

// cleanCause drops the "json: " prefix that encoding/json puts in front of
// errors, which says nothing to a user.
func cleanCause(err error) error {
	msg := err.Error()
	if s, ok := strings.CutPrefix(msg, "json: "); ok {
		return errors.New(s)
	}
	return err
}

// typeMeta reads kind and apiVersion without judging anything else.
func typeMeta(js []byte) (kind, apiVersion string) {
	var tm struct {
		Kind       any `json:"kind"`
		APIVersion any `json:"apiVersion"`
	}
	_ = json.Unmarshal(js, &tm)
	s := func(v any) string {
		if v == nil {
			return ""
		}
		if str, ok := v.(string); ok {
			return str
		}
		return fmt.Sprint(v)
	}
	return s(tm.Kind), s(tm.APIVersion)
}

// checkTypeMeta verifies kind and apiVersion when they are present.
func checkTypeMeta(js []byte, file, prefix string, kinds []string, apiVersion string) error {
	kind, av := typeMeta(js)
	if kind != "" && !contains(kinds, kind) {
		return &Error{File: file, Field: joinPath(prefix, "kind"), Value: kind,
			Err: fmt.Errorf("want %s", strings.Join(kinds, " or "))}
	}
	if av != "" && av != apiVersion {
		return &Error{File: file, Field: joinPath(prefix, "apiVersion"), Value: av,
			Err: fmt.Errorf("want %s", apiVersion)}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
