package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

// The flags that several commands of both binaries take.

// inputSizeFlag is --max-input-size: the cap on every input file's size.
type inputSizeFlag struct{}

func (inputSizeFlag) String() string { return "" }
func (inputSizeFlag) Type() string   { return "size" }

func (inputSizeFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a size such as 256Mi: %w", err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return fmt.Errorf("want a positive size that fits 64 bits, e.g. 256Mi")
	}
	load.SetMaxInputBytes(n)
	return nil
}

// RegisterInputFlags adds --max-input-size to a command that reads input
// files.
func RegisterInputFlags(fs *pflag.FlagSet) {
	fs.Var(inputSizeFlag{}, "max-input-size", fmt.Sprintf("refuse input files larger than this, e.g. 256Mi (default %dMi): decoding takes many times a file's size in memory", load.DefaultMaxInputBytes>>20))
}

// ProfileFlag is --profile: the policy profile (policy.ParseProfile).
type ProfileFlag struct{ p policy.Profile }

// Profile is the profile the flag names (the kubelet profile unless set).
func (f *ProfileFlag) Profile() policy.Profile { return f.p }

func (f *ProfileFlag) String() string { return f.p.String() }
func (f *ProfileFlag) Type() string   { return "profile" }

func (f *ProfileFlag) Set(s string) error {
	p, err := policy.ParseProfile(s)
	if err != nil {
		return err
	}
	f.p = p
	return nil
}

// RegisterProfileFlag adds --profile to a command that runs the engine.
func RegisterProfileFlag(fs *pflag.FlagSet) *ProfileFlag {
	f := &ProfileFlag{}
	fs.Var(f, "profile", "policy profile: \"kubelet\" (the default: every decision the kubelet v1.37.2's), \"extended\" "+
		"(every behaviour beyond the kubelet), or a comma-separated list of "+strings.Join(policy.ProfileBehaviours(), ", ")+
		" (docs/profile.md)")
	return f
}

// Wrap breaks s at spaces so that lines stay within width, indenting
// continuation lines.
func Wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		if i > 0 {
			if line+1+len(word) > width {
				b.WriteString("\n" + indent)
				line = 0
			} else {
				b.WriteByte(' ')
				line++
			}
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}

// Dash is s, or "-" for a value not given: a table's empty cell.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
