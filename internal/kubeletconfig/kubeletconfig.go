// Package kubeletconfig reads the kubelet's configuration as the kubelet
// v1.37.2 reads it (cmd/kubelet/app/server.go): its --config file (decoded
// strictly, then leniently), the evictionHard defaults merged in
// (loadConfigFile), then the drop-ins of its --config-dir merged over it
// (mergeKubeletConfigurations) — or a /configz dump, which is all of that
// and the kubelet's command line already. The caller lays the kubelet's
// eviction flags over the result (load.EvictionFlags.Apply), as the kubelet
// re-applies its command line last.
//
// It also finds the kubelet's command line in /proc (KubeletProcess) and
// judges the kubelet version a Node reports (CheckKubeletVersion).
package kubeletconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"

	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

// DropInExt is the extension of the drop-ins the kubelet reads from its
// --config-dir; other files there are skipped.
const DropInExt = ".conf"

// Source names a kubelet configuration: the kubelet's --config and
// --config-dir.
type Source struct {
	// File is a KubeletConfiguration file or a /configz dump; "" for none
	// (a kubelet without --config).
	File string
	// DropInDir is the kubelet's --config-dir; "" for none.
	DropInDir string
}

// Config is a kubelet configuration as the kubelet holds it after reading
// its file and drop-ins, before its command line.
type Config struct {
	// Kubelet is the configuration. Read from a file alone it is the file
	// as decoded, not defaulted (policy.ConfigFromKubelet applies the
	// kubelet's defaults and its evictionHard merge). Merged from drop-ins
	// or read from /configz it is final (Final): evictionHard is the map the
	// kubelet uses (never nil) and mergeDefaultEvictionSettings false, so
	// that nothing merges the defaults again.
	Kubelet *kubeletconfigv1beta1.KubeletConfiguration
	// Present holds the top-level fields the file or a drop-in writes with
	// a non-null value (a later drop-in's null removes one).
	Present map[string]bool
	// Warnings are what the kubelet accepts without a word, each a
	// *load.Error naming file and field: unknown fields and duplicate keys
	// of the file (load.ErrUnknownField, load.ErrDuplicateKey), unknown
	// fields of drop-ins (ErrDropInUnknownField), drop-in fields that differ
	// from one only in case (ErrFieldCase) and a mergeDefaultEvictionSettings
	// in a drop-in (ErrMergeDefaultsInDropIn).
	Warnings []error
	// Files are the files read, in the order the kubelet merges them.
	Files []string
	// Skipped are the files of the drop-in directory the kubelet skips:
	// their name does not end in .conf.
	Skipped []string
	// Configz: the file is a /configz dump.
	Configz bool
	// Final: Kubelet's evictionHard is final (drop-ins merged, or /configz).
	Final bool
	// FileKind and FileAPIVersion are the file's own (drop-ins may set
	// them too, but the kubelet refuses a config file without them).
	FileKind, FileAPIVersion string
	// Flags are the eviction flags laid over the configuration
	// (ApplyFlags), as "--name" or "the kubelet's --name".
	Flags []string
	// Process is the kubelet's command line when ReadNode found it.
	Process *KubeletProcess

	src Source
}

// Sentinel causes of Config.Warnings (besides load's).
var (
	ErrDropInUnknownField    = errors.New("unknown field: the kubelet ignores it (drop-ins are decoded leniently)")
	ErrFieldCase             = errors.New("differs from a field name only in case: the kubelet decodes merged drop-ins case-insensitively, so it may apply this key, or the other spelling may win where both are set")
	ErrMergeDefaultsInDropIn = errors.New("has no effect in a drop-in: the kubelet merges the default evictionHard thresholds while loading the config file, before any drop-in")
)

// Describe names the configuration for messages and reports: the file, the
// drop-in directory and how many drop-ins it holds, or the /configz dump,
// and the flags laid over it; "kubelet defaults" for none of them.
func (c *Config) Describe() string {
	d := c.describeFiles()
	if len(c.Flags) == 0 {
		if d == "" {
			return "kubelet defaults"
		}
		return d
	}
	if d == "" {
		return strings.Join(c.Flags, " ")
	}
	return d + " + " + strings.Join(c.Flags, " ")
}

func (c *Config) describeFiles() string {
	switch {
	case c.Configz:
		return c.src.File + " (/configz)"
	case c.src.DropInDir == "":
		return c.src.File
	}
	n := len(c.Files)
	if c.src.File != "" {
		n--
	}
	dir := fmt.Sprintf("%s (%d drop-in%s)", c.src.DropInDir, n, plural(n))
	if c.src.File == "" {
		return dir
	}
	return c.src.File + " + " + dir
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Read reads the configuration src names. Errors name the file, field and
// value; where the kubelet itself would refuse to start (a drop-in without
// kind, with a duplicate key, a merged value of the wrong type) they say so.
// A source that names nothing is the empty configuration of a kubelet
// without --config.
func Read(src Source) (*Config, error) {
	c := &Config{Kubelet: &kubeletconfigv1beta1.KubeletConfiguration{}, Present: map[string]bool{}, src: src}
	if src.File != "" {
		doc, err := load.ReadKubeletDocument(src.File)
		if err != nil {
			return nil, err
		}
		c.Kubelet, c.Present, c.Warnings, c.Configz = doc.Config, doc.Present, doc.Warnings, doc.Configz
		c.FileKind, c.FileAPIVersion = doc.Config.Kind, doc.Config.APIVersion
		c.Files = []string{src.File}
	}
	switch {
	case c.Configz && src.DropInDir != "":
		return nil, fmt.Errorf("%s is a /configz dump, the configuration the kubelet runs with: its drop-ins are merged in already; drop --config-dir %s", src.File, src.DropInDir)
	case c.Configz:
		finalize(c.Kubelet)
		c.Final = true
		return c, nil
	case src.DropInDir == "":
		return c, nil
	}
	if err := c.mergeDropIns(); err != nil {
		return nil, err
	}
	return c, nil
}

// ParseConfigz reads a kubelet's /configz document fetched from the node
// (name names it in errors and Describe): the configuration the kubelet
// runs with, final as Read makes a /configz dump. A document that is not a
// /configz dump is refused: a plain KubeletConfiguration from a kubelet's
// endpoint would mean the defaults had not been applied.
func ParseConfigz(data []byte, name string) (*Config, error) {
	doc, err := load.ParseKubeletDocument(data, name)
	if err != nil {
		return nil, err
	}
	if !doc.Configz {
		return nil, fmt.Errorf("%s: not a /configz document (no %q object)", name, load.ConfigzKey)
	}
	c := &Config{Kubelet: doc.Config, Present: doc.Present, Warnings: doc.Warnings, Configz: true, Final: true,
		FileKind: doc.Config.Kind, FileAPIVersion: doc.Config.APIVersion, Files: []string{name}, src: Source{File: name}}
	finalize(c.Kubelet)
	return c, nil
}

// mergeDropIns is the kubelet's mergeKubeletConfigurations: the
// configuration so far as JSON (encoding/json, the v1beta1 type), each
// drop-in applied as an RFC 7386 JSON merge patch (evanphx/json-patch, the
// kubelet's library) in filepath.WalkDir order — lexical, subdirectories
// included — and the result decoded with encoding/json.
func (c *Config) mergeDropIns() error {
	base := c.Kubelet.DeepCopy()
	if c.src.File != "" {
		// loadConfigFile's merge happens before the drop-ins; a kubelet
		// without --config never gets the defaults.
		base.EvictionHard = policy.EffectiveEvictionHard(c.Kubelet)
	}
	setPresenceDefaults(base)
	merged, err := json.Marshal(base)
	if err != nil {
		return fmt.Errorf("kubelet configuration as JSON: %w", err)
	}
	err = filepath.WalkDir(c.src.DropInDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if filepath.Ext(d.Name()) != DropInExt {
			c.Skipped = append(c.Skipped, path)
			return nil
		}
		data, err := load.ReadFile(path)
		if err != nil {
			return err
		}
		in, err := load.ParseKubeletDropIn(data, path)
		if err != nil {
			return err
		}
		if err := checkDropInIdentity(in, path); err != nil {
			return err
		}
		c.noteDropIn(in.Patch, path)
		if merged, err = jsonpatch.MergePatch(merged, in.Patch); err != nil {
			return &load.Error{File: path, Err: fmt.Errorf("merging over the configuration: %w", err)}
		}
		c.Files = append(c.Files, path)
		return nil
	})
	if err != nil {
		var le *load.Error
		if errors.As(err, &le) {
			return err
		}
		return fmt.Errorf("--config-dir %s: %w (the kubelet does not start: failed to walk through kubelet dropin directory)", c.src.DropInDir, err)
	}
	kc, err := load.DecodeKubeletMerged(merged, c.describeFiles())
	if err != nil {
		return fmt.Errorf("%w (the kubelet does not start: failed to unmarshal merged JSON into kubelet configuration)", err)
	}
	finalize(kc)
	c.Kubelet, c.Final = kc, true
	return nil
}

// ApplyFlags lays eviction flags over the configuration as the kubelet
// re-applies its command line over its file and drop-ins (a map flag
// replaces the whole map, a scalar flag the field); by names them in
// Describe ("" for evictd's own command line, "the kubelet's" for the
// kubelet's).
func (c *Config) ApplyFlags(flags *load.EvictionFlags, by string) error {
	if flags == nil {
		return nil
	}
	if err := flags.Apply(c.Kubelet); err != nil {
		return err
	}
	for _, name := range flags.Set() {
		f := "--" + name
		if by != "" {
			f = by + " " + f
		}
		c.Flags = append(c.Flags, f)
	}
	return nil
}

// Policy is the engine's configuration from this kubelet configuration
// (policy.ConfigFromKubelet), its errors prefixed with Describe so that they
// name the file or flags the field came from.
func (c *Config) Policy() (policy.Config, error) {
	cfg, err := policy.ConfigFromKubelet(c.Kubelet)
	if err != nil {
		return policy.Config{}, &SourceError{Source: c.Describe(), Err: err}
	}
	return cfg, nil
}

// SourceError is a policy error with the configuration it came from.
type SourceError struct {
	Source string
	Err    error
}

func (e *SourceError) Error() string { return e.Source + ": " + e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// checkDropInIdentity refuses a drop-in the kubelet refuses: without kind,
// or of another kind or apiVersion.
func checkDropInIdentity(in *load.KubeletDropIn, path string) error {
	if in.Kind == "" {
		return &load.Error{File: path, Field: "kind",
			Err: errors.New("Object 'Kind' is missing: the kubelet does not start (failed to load kubelet dropin file); add kind: KubeletConfiguration and apiVersion: kubelet.config.k8s.io/v1beta1")}
	}
	if in.Kind != load.KubeletConfigKind || in.APIVersion != load.KubeletConfigAPIVersion {
		field, value := "apiVersion", in.APIVersion
		if in.Kind != load.KubeletConfigKind {
			field, value = "kind", in.Kind
		}
		return &load.Error{File: path, Field: field, Value: value,
			Err: fmt.Errorf("the kubelet does not start: failed to load kubelet dropin file, unknown apiVersion/kind %s, Kind=%s; want %s %s",
				in.APIVersion, in.Kind, load.KubeletConfigAPIVersion, load.KubeletConfigKind)}
	}
	return nil
}

// noteDropIn records the drop-in's top-level fields in Present and what the
// kubelet accepts in it without a word in Warnings.
func (c *Config) noteDropIn(patch []byte, path string) {
	var top map[string]json.RawMessage
	_ = json.Unmarshal(patch, &top) // an object: load.ParseKubeletDropIn checked
	known := fieldNames()
	for k, v := range top {
		name := k
		if !known[k] {
			for f := range known {
				if strings.EqualFold(f, k) {
					name = f
					c.Warnings = append(c.Warnings, &load.Error{File: path, Field: k, Value: f, Err: ErrFieldCase})
				}
			}
		}
		if string(v) == "null" {
			delete(c.Present, name)
		} else {
			c.Present[name] = true
		}
		if name == "mergeDefaultEvictionSettings" && string(v) == "true" {
			c.Warnings = append(c.Warnings, &load.Error{File: path, Field: k, Value: "true", Err: ErrMergeDefaultsInDropIn})
		}
	}
	strictErrs, err := sigsjson.UnmarshalStrict(patch, &kubeletconfigv1beta1.KubeletConfiguration{})
	if err != nil {
		return // a wrong type: the merged decode names it, if it survives the merge
	}
	for _, e := range strictErrs {
		var fe sigsjson.FieldError
		if !errors.As(e, &fe) {
			continue
		}
		field := fe.FieldPath()
		if _, isTop := top[field]; isTop && !known[field] && c.caseWarned(path, field) {
			continue
		}
		c.Warnings = append(c.Warnings, &load.Error{File: path, Field: field, Err: ErrDropInUnknownField})
	}
}

// caseWarned reports whether key of the drop-in at path has a case warning.
func (c *Config) caseWarned(path, key string) bool {
	for _, w := range c.Warnings {
		var le *load.Error
		if errors.As(w, &le) && le.File == path && le.Field == key && errors.Is(w, ErrFieldCase) {
			return true
		}
	}
	return false
}

// fieldNames are the JSON names of the KubeletConfiguration's top-level
// fields.
func fieldNames() map[string]bool {
	out := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if name != "" && name != "-" {
				out[name] = true
			}
		}
	}
	walk(reflect.TypeOf(kubeletconfigv1beta1.KubeletConfiguration{}))
	return out
}

// setPresenceDefaults sets the kubelet's defaults (SetDefaults_
// KubeletConfiguration) of the fields evictd reads whose JSON is absent
// when unset: the kubelet's base JSON for the merge holds its defaulted
// configuration, and whether a field is in it decides the outcome of a
// drop-in that spells the field in another case (encoding/json matches it
// case-insensitively; of two spellings the later key wins, and the merged
// keys are sorted). Values are the defaults policy and memqos apply anyway.
func setPresenceDefaults(kc *kubeletconfigv1beta1.KubeletConfiguration) {
	if kc.EnforceNodeAllocatable == nil {
		kc.EnforceNodeAllocatable = policy.DefaultEnforceNodeAllocatable()
	}
	if kc.LocalStorageCapacityIsolation == nil {
		on := true
		kc.LocalStorageCapacityIsolation = &on
	}
	if kc.MergeDefaultEvictionSettings == nil {
		off := false
		kc.MergeDefaultEvictionSettings = &off
	}
	if kc.MemoryReservationPolicy == "" {
		kc.MemoryReservationPolicy = kubeletconfigv1beta1.NoneMemoryReservationPolicy
	}
}

// finalize marks a configuration whose evictionHard the kubelet holds as
// is: the map as it stands (none is no hard threshold, not the defaults)
// and no merge of the defaults.
func finalize(kc *kubeletconfigv1beta1.KubeletConfiguration) {
	if kc.EvictionHard == nil {
		kc.EvictionHard = map[string]string{}
	}
	off := false
	kc.MergeDefaultEvictionSettings = &off
}
