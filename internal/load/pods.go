package load

import (
	"encoding/json"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// PodsFile reads and decodes pods; see ParsePods for the accepted shapes.
func PodsFile(path string) ([]*v1.Pod, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePods(data, path)
}

// ParsePods decodes pods, in JSON or YAML, from any of the shapes users have:
//   - a PodList, or a List whose items are Pods (kubectl get pods -o json|yaml);
//   - a plain JSON/YAML array of Pods;
//   - a single Pod.
//
// An object without kind is a list when it has "items", else a Pod. Items'
// kind must be Pod and apiVersion v1 when present. Decoding is strict and
// errors name the path (e.g. items[3].spec.containers[0].resources.limits.memory).
// An empty list gives no pods and no error.
func ParsePods(data []byte, name string) ([]*v1.Pod, error) {
	js, top, err := toJSON(data, name)
	if err != nil {
		return nil, err
	}
	switch top {
	case topList:
		var items []json.RawMessage
		if err := json.Unmarshal(js, &items); err != nil {
			return nil, &Error{File: name, Err: fmt.Errorf("not valid JSON: %w", err)}
		}
		return decodePodItems(items, name, "")
	case topScalar:
		return nil, &Error{File: name, Err: fmt.Errorf("top level is %s, want a Pod, a PodList or a list of Pods", top)}
	}

	kind, _ := typeMeta(js)
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(js, &probe); err != nil {
		return nil, &Error{File: name, Err: fmt.Errorf("not valid JSON: %w", err)}
	}
	_, hasItems := probe["items"]
	if kind == "PodList" || kind == "List" || (kind == "" && hasItems) {
		if err := checkTypeMeta(js, name, "", []string{"PodList", "List"}, "v1"); err != nil {
			return nil, err
		}
		var list struct {
			Kind       string            `json:"kind,omitempty"`
			APIVersion string            `json:"apiVersion,omitempty"`
			Metadata   json.RawMessage   `json:"metadata,omitempty"`
			Items      []json.RawMessage `json:"items"`
		}
		if err := decodeStrict(js, name, "", &list); err != nil {
			return nil, err
		}
		if _, ok := probe["items"]; !ok {
			// kubectl always writes items ([] when empty); a list without
			// them is a file cut short.
			return nil, &Error{File: name, Field: "items", Err: fmt.Errorf("required in a %s ([] when empty)", kind)}
		}
		return decodePodItems(list.Items, name, "items")
	}
	pod, err := decodePod(js, name, "")
	if err != nil {
		return nil, err
	}
	return []*v1.Pod{pod}, nil
}

func decodePodItems(items []json.RawMessage, file, prefix string) ([]*v1.Pod, error) {
	pods := make([]*v1.Pod, 0, len(items))
	for i, raw := range items {
		pod, err := decodePod(raw, file, prefix+"["+strconv.Itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

func decodePod(raw json.RawMessage, file, path string) (*v1.Pod, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, &Error{File: file, Field: path, Value: rawText(raw), Err: fmt.Errorf("want a Pod object")}
	}
	if err := checkTypeMeta(raw, file, path, []string{"Pod"}, "v1"); err != nil {
		return nil, err
	}
	pod := &v1.Pod{}
	if err := decodeStrict(raw, file, path, pod); err != nil {
		return nil, err
	}
	return pod, nil
}
